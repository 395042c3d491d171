"""Two runs compared: each difference with its interval, a verdict only where the data decide.

``compare(a, b, band=...)`` compares run B with run A (two ``Report``s) on

* the median step **period** (decode steps), relative band;
* the **idle fraction** (idle over period of the window's steps), band in percentage points;
* the mean **idle per step**, band relative to A's period (what the CI gate's idle regression reads);
* **tokens/s** (tokens over time of the window's steps), relative band;
* the **device time** of each op, per decode step (``forward``, ``sample``): medians, relative band.

Each ``Difference`` carries B − A and B / A with a bootstrap interval from the two runs' own
per-step variability (``intervals.compare_stat``). Its verdict is "better" or "worse" only when
the interval of B − A excludes 0 *and* the difference is larger than the band; otherwise "no
clear change": a 2-core machine's load moves one run's period by more than 10% without any code
changing, and a verdict the noise could have produced is not one a user should act on.

**The machine changed.** The intervals see each run's variability, not a change of the machine
between the runs. On the same workload the device's own time per op is the machine's speed
(the same ops on the same batches): when it differs beyond the band with an interval that
excludes "no change" (``machine_change``), the period and idle of the two runs are not
comparable: a slower device lengthens the period, and a device that drains later hides host
lateness or shows more of it. ``Comparison.valid`` is then False and ``why_not`` says which op
moved ("the machine changed: forward 3.30 ms -> 12.22 ms"). A code change that makes the device
work itself slower reads the same; the comparison says so rather than guess which it was.
Two runs of different workloads (``same_workload``) have device times that differ by design:
their device rows are differences like any other, and no validity is claimed either way.

**The machine was too busy.** The host's side has no such per-op yardstick, but the trace header
says how long the engine's thread waited for a CPU over the run (``host_run``, Linux:
``recording/run_cpu.py``). When it waited more than ``HOST_BUSY`` of either run, the machine
ran something else for most of it and the run's period measures the machine: two identical
blocking runs beside two CPU burners (engine thread waiting 97-99% of the run, its spin-waits
included) had median periods of 4.0 and 20.0 ms, while runs beside the other engineers' tests
(waiting 22-24%) stayed within 4% of a quiet run's (0.1-0.5%). The pair is then not valid either.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from photon_trace.telemetry.analysis.intervals import Interval, compare_stat, mean, median, share
from photon_trace.telemetry.analysis.report import Report
from photon_trace.telemetry.analysis.steps import StepStats

BAND = 0.05             # a relative difference smaller than this is no verdict (times, rates)
BAND_PP = 0.005         # shares: half a percentage point
DEVICE_BAND = 0.10      # the device's time per op moving more than this between runs: the machine changed
HOST_BUSY = 0.5         # the engine thread waiting for a CPU more than this share of a run: too busy to tell

DEVICE_OPS = (("forward", "forward_ns"), ("sample", "sample_ns"))
"""The device ops compared per step: the model's (stage, prefill, forward) and sampling's."""

DEVICE_FREE = frozenset({"depth", "mode", "planned_stops", "seed", "mask_upload"})
"""Settings that change how the host drives the device, not the device's work: two runs that
differ only in these run the same device ops on the same batches (blocking against pipelined,
the mask-upload bug against its fix, another engine seed for the same seeded requests)."""

NO_CLEAR_CHANGE = "no clear change"

EXPLAINED = frozenset({"period", "idle_per_step"})
"""The measures whose ``Difference.explained`` is what a change of the device's own speed explains."""


@dataclass(frozen=True, slots=True)
class Difference:
    """B against A on one measure: each run's value, B − A and B / A with intervals, and the band
    (in the measure's unit) a difference must exceed to be a verdict."""
    key: str
    label: str
    unit: str               # "ms", "/s" (a rate) or "%" (a fraction; its differences are in percentage points)
    a: float
    b: float
    delta: Interval         # B − A
    ratio: Interval         # B / A
    band: float
    better: str = "lower"   # which way is better: "lower" or "higher"
    # what the device's own change can explain of B − A, as a range (low, high) with 0 in it: a
    # device slower by x ms a step can lengthen the period by up to x and hide up to x of idle, and
    # need not (the host may be on the critical path); (0, 0) where it explains nothing
    explained: tuple[float, float] = (0.0, 0.0)

    @property
    def beyond(self) -> float:
        """How far B − A lies beyond what the device explains (signed; 0 inside the range)."""
        lo, hi = self.explained
        return self.delta.point - hi if self.delta.point > hi else self.delta.point - lo if self.delta.point < lo else 0.0

    @property
    def decided(self) -> bool:
        """The interval of B − A lies wholly outside no change (and what the device's own change
        explains), and the difference beyond it is larger than the band."""
        lo, hi = self.explained
        outside = self.delta.low > hi or self.delta.high < lo
        return outside and abs(self.beyond) > self.band

    @property
    def verdict(self) -> str:
        if not self.decided:
            return NO_CLEAR_CHANGE
        return "better" if (self.beyond < 0) == (self.better == "lower") else "worse"

    def describe(self) -> str:
        """One line: the values, the change with its interval, the band."""
        if self.unit == "/s":
            return (f"{self.label} {self.a:,.1f} -> {self.b:,.1f}, x{self.ratio.point:.3f} (95% interval "
                    f"x{self.ratio.low:.3f}-{self.ratio.high:.3f}; band ±{self.band:,.1f})")
        if self.unit == "%":
            change = (f"{100 * self.delta.point:+.2f} pp (95% interval {100 * self.delta.low:+.2f} to "
                      f"{100 * self.delta.high:+.2f} pp; band ±{100 * self.band:.2f} pp)")
            return f"{self.label} {100 * self.a:.2f}% -> {100 * self.b:.2f}%, {change}"
        lo, hi = self.explained
        device = f"; the device's own change explains {lo:+.3f} to {hi:+.3f} ms" if (lo, hi) != (0.0, 0.0) else ""
        if np.isfinite([self.ratio.low, self.ratio.high]).all():
            interval = f"x{self.ratio.point:.3f} (95% interval x{self.ratio.low:.3f}-{self.ratio.high:.3f}"
        else:   # A was 0 (no idle): the difference's own interval
            interval = f"(95% interval {self.delta.low:+.3f} to {self.delta.high:+.3f} ms"
        return (f"{self.label} {self.a:.3f} ms -> {self.b:.3f} ms, {self.delta.point:+.3f} ms, {interval}; "
                f"band ±{self.band:.3f} ms{device})")


@dataclass(frozen=True, slots=True)
class Comparison:
    """B compared with A: the differences, the device's time per op, and whether the pair is valid."""
    differences: list[Difference]
    device: list[Difference]
    same_workload: bool
    workload_differs: list[str] = field(default_factory=list)   # the settings that differ, when not the same
    machine_changed: list[Difference] = field(default_factory=list)
    too_busy: str = ""      # which run's engine thread waited for a CPU most of the run, when one did

    @property
    def valid(self) -> bool:
        """False when the device's own speed changed between two runs of one workload, or the
        machine kept either run's engine thread waiting for a CPU most of the run."""
        return not self.machine_changed and not self.too_busy

    @property
    def why_not(self) -> str:
        """Why the comparison is not valid ("" when it is)."""
        why = []
        if self.machine_changed:
            moved = "; ".join(f"{d.label} {d.a:.2f} ms -> {d.b:.2f} ms (x{d.ratio.point:.2f}, 95% interval "
                              f"{d.ratio.low:.2f}-{d.ratio.high:.2f})" for d in self.machine_changed)
            why.append(f"the machine changed: {moved} per step on the same workload, beyond the band "
                       f"±{DEVICE_BAND:.0%}")
        if self.too_busy:
            why.append(f"the machine was too busy: {self.too_busy}")
        return "; ".join(why) + ("; the period and idle of the two runs cannot be compared" if why else "")

    def decides(self, d: Difference) -> bool:
        """Whether ``d``'s verdict stands. On a valid pair, always. On a pair too busy to tell,
        never. On one whose device changed, only for a measure that knows what that change explains
        (``Difference.explained``: the period, idle per step) and only where the difference is
        beyond it: a host delay that made the period 6 times longer while the worker, left the
        CPU, ran twice as fast is a regression the machine cannot have made."""
        if self.too_busy:
            return False
        if self.machine_changed:
            return d.key in EXPLAINED and d.decided
        return True

    def get(self, key: str) -> Difference | None:
        return next((d for d in self.differences + self.device if d.key == key), None)


def workload_differs(a: dict, b: dict, free: frozenset[str] = DEVICE_FREE) -> list[str]:
    """The settings (other than ``free``) in which two runs' recorded settings differ."""
    sa = {k: v for k, v in (a or {}).items() if k not in free}
    sb = {k: v for k, v in (b or {}).items() if k not in free}
    return sorted(k for k in sa.keys() | sb.keys() if sa.get(k) != sb.get(k))


def _decode(steps: list[StepStats]) -> list[StepStats]:
    """Decode steps when there are any (as ``steps.median_ms`` takes its medians)."""
    return [s for s in steps if s.kind == "decode"] or list(steps)


def _ms(steps: list[StepStats], name: str) -> np.ndarray:
    return np.array([getattr(s, name) for s in steps], dtype=float) / 1e6


def _device_slower(da: list[StepStats], db: list[StepStats]) -> float:
    """How much longer B's device ran a step than A's (ms; negative: shorter): the runs' median
    device time per step, forward and sample."""
    return float(np.median(_ms(db, "forward_ns") + _ms(db, "sample_ns"))
                 - np.median(_ms(da, "forward_ns") + _ms(da, "sample_ns")))


def _span(x: float) -> tuple[float, float]:
    """The range from 0 to ``x``: what a change of ``x`` explains, none of it or all."""
    return (min(0.0, x), max(0.0, x))


def runq_share(host_run: dict | None) -> float | None:
    """The share of a run its engine thread waited for a CPU (None when the trace does not say)."""
    if not host_run or not host_run.get("wall_ns"):
        return None
    return host_run["runq_ns"] / host_run["wall_ns"]


def busy_runs(host_runs: tuple[dict | None, dict | None], limit: float = HOST_BUSY,
              names: tuple[str, str] = ("run A", "run B")) -> str:
    """Which of the two runs (named ``names``) kept its engine thread waiting for a CPU over ``limit`` of the
    run, with the load average at its end ("" when neither did, or the traces do not say)."""
    said = []
    for name, h in zip(names, host_runs):
        share = runq_share(h)
        if share is not None and share > limit:
            load = h.get("load_avg") or [float("nan")]
            said.append(f"{name}'s engine thread waited for a CPU {share:.0%} of the run (load average "
                        f"{load[0]:.1f} on {h.get('cpus')} CPUs)")
        # the share counts a spin-wait's time too: a thread spinning on the device wanted the CPU
    return " and ".join(said)


def compare(a: Report, b: Report, *, band: float = BAND, band_pp: float = BAND_PP,
            device_band: float = DEVICE_BAND, host_runs: tuple[dict | None, dict | None] = (None, None),
            names: tuple[str, str] = ("run A", "run B")) -> Comparison:
    """B compared with A (see the module docstring); ``band`` relative, ``band_pp`` for shares;
    ``host_runs``: each trace header's ``host_run`` (what the OS did with the engine thread)."""
    if not a.steps or not b.steps:
        raise ValueError("a run with no steps in its window cannot be compared")
    da, db = _decode(a.steps), _decode(b.steps)
    differs = workload_differs(a.settings, b.settings)
    diffs = []
    pa, pb = _ms(da, "period_ns"), _ms(db, "period_ns")
    period_a = float(np.median(pa))
    d, r = compare_stat(pa, pb, median)
    diffs.append(Difference("period", "median period", "ms", period_a, float(np.median(pb)), d, r, band * period_a,
                            explained=(0.0, 0.0) if differs else _span(_device_slower(da, db))))
    ia = np.c_[_ms(a.steps, "idle_ns"), _ms(a.steps, "period_ns")]
    ib = np.c_[_ms(b.steps, "idle_ns"), _ms(b.steps, "period_ns")]
    d, r = compare_stat(ia, ib, share)
    diffs.append(Difference("idle_fraction", "idle fraction", "%", float(share(ia[None])[0]),
                            float(share(ib[None])[0]), d, r, band_pp))
    ta = np.c_[[s.tokens for s in a.steps], _ms(a.steps, "period_ns") / 1e3]
    tb = np.c_[[s.tokens for s in b.steps], _ms(b.steps, "period_ns") / 1e3]
    d, r = compare_stat(ta, tb, share)
    diffs.append(Difference("tokens_per_s", "tokens/s", "/s", float(share(ta[None])[0]), float(share(tb[None])[0]),
                            d, r, band * float(share(ta[None])[0]), better="higher"))
    d, r = compare_stat(ia[:, 0], ib[:, 0], mean)
    diffs.append(Difference("idle_per_step", "idle per step", "ms", float(ia[:, 0].mean()), float(ib[:, 0].mean()),
                            d, r, band * period_a, explained=(0.0, 0.0) if differs else _span(-_device_slower(da, db))))
    device = []
    for label, name in DEVICE_OPS:
        xa, xb = _ms(da, name), _ms(db, name)
        if not np.median(xa) or not np.median(xb):
            continue    # an op one run does not have per step (an imported trace: no sampling)
        d, r = compare_stat(xa, xb, median)
        device.append(Difference(label, label, "ms", float(np.median(xa)), float(np.median(xb)), d, r,
                                 device_band * float(np.median(xa))))
    same = not differs
    changed = [x for x in device if x.decided] if same else []
    return Comparison(diffs, device, same, differs, changed, busy_runs(host_runs, names=names))
