"""A row's charge against what removing its fault gave back, in the same switching runs, and
whether the data decide.

A switching run (``interleave.run_alternating``) turns one fault on and off every few ticks.
Each block with the fault, against the mean of its two neighbours without it over the step
positions all three have (``interleave.matched``'s blocks, less their first ``skip`` steps),
gives per step:

* the **period gain**: the period the fault's removal gave back;
* the **idle gain**: the device idle it gave back (period less the compute stream's busy
  time: the device's timeline alone, no attribution);
* the **charge**: the row's charge (``charging.charged_spans``: its bubbles and the stretches
  it shares with a sync) in those steps, less the same row's in the neighbours (without the
  fault the row keeps the phase's own time: a slow plan's fault is its delay, not the plan).

Both are read from the same steps of one run, so nothing between runs (a shared machine's
drift, a faulty run recorded minutes from its switching runs) and no other window moves one
against the other.

The two gains differ by the device's own busy time per step, which may change when the fault
does: a host-process device shares the machine's cores with its host, and a fault that makes the
host sleep leaves the worker and the host more of them; removing it takes them back. On a loaded
2-core machine, without a plan that slept 50 ms a step, the device ran 7.6 ms a step slower and
the host thread waited 12 ms a step more in the run queue (its own counters, ``runq_ns``), and
the read's own idle grew by as much. The charge says what the removal gives back with the machine
at the speed the trace shows. So where the machine changed without the fault, by the device's
busy time and the host's run-queue time outside the faults' own waits (each per step, from the
device's timeline and the thread's counters: no attribution) by more than ``BAND`` of the gain,
the comparison is not valid and the data cannot decide (as ``comparison.machine_change`` says of
two runs).

Intervals: the compared blocks (pooled over runs) are resampled together
(``intervals.resampled``, one block at a time: blocks are tens of steps apart), so the charge,
the gains and their ratio keep their correlation. The verdict is *within* where the interval of
the charge over the period gain lies inside 1 ± ``BAND``, *outside* where it lies outside, and
*cannot decide* where it straddles an edge, no gain was measured, or the machine changed.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.bubbles import busy_intervals, device_gaps, split_gaps
from photon_trace.telemetry.analysis.charging import charged_spans
from photon_trace.telemetry.analysis.intervals import LEVEL, RESAMPLES, SEED, resampled
from photon_trace.telemetry.analysis.window import steady_state_window, step_starts
from photon_trace.telemetry.trace.lanes import host_phases

BAND = 0.25
WITHIN, OUTSIDE, UNDECIDED = "within", "outside", "cannot decide"
PERIOD, BUSY, RUNQ, CHARGE = 0, 1, 2, 3     # columns of a step's row (one charge column per row compared)


def _covered(spans: list[tuple[int, int]]) -> Callable[[np.ndarray], np.ndarray]:
    """t -> the time of the disjoint, ordered ``spans`` before t."""
    if not spans:
        return lambda t: np.zeros(len(t))
    a = np.array([s[0] for s in spans], dtype=np.int64)
    b = np.array([s[1] for s in spans], dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(b - a)])

    def f(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(a, t, side="right")       # spans starting at or before t
        last = np.maximum(k - 1, 0)
        inside = np.where(k > 0, np.clip(t - a[last], 0, b[last] - a[last]), 0)
        return before[np.maximum(k - 1, 0)] * (k > 0) + inside
    return f


def _union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _run_queue(trace) -> Callable[[np.ndarray], np.ndarray]:
    """t -> the host thread's run-queue time (runnable, not running: ``runq_ns``) in the phases
    that began before t, less that of the unexpected waits inside them (a fault's own wait: its
    removal takes that away by itself, the machine unchanged). Nothing where the trace has no
    run-queue counters."""
    phases = host_phases(trace)
    waits = sorted((w.t0, w.t1, w.runq_ns) for w in trace.waits if not w.expected and w.runq_ns > 0)
    at, weight = [], []
    for h in sorted((h for h in trace.host_spans if h.phase in phases and h.runq_ns >= 0), key=lambda h: h.t0):
        at.append(h.t0)
        weight.append(h.runq_ns - sum(q for a, b, q in waits if h.t0 <= a and b <= h.t1))
    at_, before = np.array(at, dtype=np.int64), np.concatenate([[0], np.cumsum(weight)])
    return lambda t: before[np.searchsorted(at_, t, side="left")]


def step_rows(trace, blocks: Iterable[tuple[int, int, bool]], rows: list[Callable[[tuple], bool]],
              skip: int = 2) -> list[tuple[bool, np.ndarray]]:
    """Per block (t0, t1, on), its steps as ``interleave.block_periods`` takes them (started inside
    it, the next one too, less the first ``skip``): (on, array (steps, 3 + len(rows))) of the
    step's period, the compute stream's busy time in it, the host's run-queue time outside
    unexpected waits (``_run_queue``, by the phases that began in it) and, per row (a predicate
    on a (cause, detail) key: a phase's rows whether or not the host ran), its charge in it; ns."""
    window = steady_state_window(trace)
    spans = charged_spans(split_gaps(trace, device_gaps(trace, window)))
    counters = [_covered(busy_intervals(trace, window)), _run_queue(trace)] + [
        _covered(_union(s for key, v in spans.items() if keep(key) for s in v)) for keep in rows]
    starts = np.array([t for t, _ in step_starts(trace)], dtype=np.int64)
    out = []
    for b0, b1, on in blocks:
        inside = starts[(starts >= b0) & (starts <= b1)]
        a, b = inside[:-1][skip:], inside[1:][skip:]
        cols = [b - a] + [f(b) - f(a) for f in counters]
        out.append((on, np.stack(cols, axis=1).astype(float) if len(a) else np.zeros((0, len(cols)))))
    return out


def compared(blocks: list[tuple[bool, np.ndarray]]) -> np.ndarray:
    """Per block with the fault between two without it, over the positions all three have (at
    least 4): [its steps' sums..., the neighbours' mean sums..., steps]; (blocks, 2 * cols + 1)."""
    out = []
    for (_, before), (on, mid), (_, after) in zip(blocks, blocks[1:], blocks[2:]):
        n = min(len(before), len(mid), len(after))
        if on and n >= 4:
            out.append(np.concatenate([mid[:n].sum(0), (before[:n].sum(0) + after[:n].sum(0)) / 2, [n]]))
    return np.array(out)


class Verdict(NamedTuple):
    """One row against its fault's removal, in ms per step, each with its interval (low, high)."""
    charge: tuple[float, float, float]
    period_gain: tuple[float, float, float]
    idle_gain: tuple[float, float, float]
    busy_change: tuple[float, float, float]    # the device's busy time per step without the fault, less with it
    runq_change: tuple[float, float, float]    # the host's run-queue time per step (``_run_queue``), the same way
    ratio: tuple[float, float, float]          # the charge over the period gain
    verdict: str
    reason: str                                # why the data cannot decide ("" where they do)
    blocks: int

    @property
    def why(self) -> str:
        """The verdict in words, with the numbers that decide it."""
        c, p, i, b, r, q = (self.charge, self.period_gain, self.idle_gain, self.busy_change, self.ratio,
                            self.runq_change)
        return (f"{self.verdict}{f' ({self.reason})' if self.reason else ''}: charged {c[0]:.3f} ms/step "
                f"[{c[1]:.3f}-{c[2]:.3f}], period given back {p[0]:.3f} [{p[1]:.3f}-{p[2]:.3f}], ratio {r[0]:.2f} "
                f"[{r[1]:.2f}-{r[2]:.2f}] (band 1 +- {BAND}); idle given back {i[0]:.3f} [{i[1]:.3f}-{i[2]:.3f}], "
                f"without the fault device busy {b[0]:+.3f} [{b[1]:+.3f} to {b[2]:+.3f}], host run queue "
                f"{q[0]:+.3f} [{q[1]:+.3f} to {q[2]:+.3f}]; {self.blocks} blocks")


def decide(values: np.ndarray, row: int, *, seed: int = SEED, resamples: int = RESAMPLES,
           level: float = LEVEL) -> Verdict:
    """The verdict for the ``row``-th charge column of ``compared`` blocks (pooled over runs)."""
    if not len(values):
        raise ValueError("no block with the fault had neighbours with enough steps to compare")
    cols = (values.shape[1] - 1) // 2

    def stats(x: np.ndarray) -> dict[str, np.ndarray]:
        s = x.sum(axis=-2)                     # (..., 2 * cols + 1)
        on, off, n = s[..., :cols], s[..., cols:2 * cols], s[..., -1]
        period = (on[..., PERIOD] - off[..., PERIOD]) / n / 1e6
        busy = (off[..., BUSY] - on[..., BUSY]) / n / 1e6
        runq = (off[..., RUNQ] - on[..., RUNQ]) / n / 1e6
        charge = (on[..., CHARGE + row] - off[..., CHARGE + row]) / n / 1e6
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(period > 0, charge / np.where(period > 0, period, 1), np.nan)
        return dict(charge=charge, period=period, idle=period + busy, busy=busy, runq=runq, machine=busy + runq,
                    ratio=ratio)

    point = {k: float(v) for k, v in stats(values).items()}
    # one generator seeded alike for each: the same resamples of blocks for every figure (jointly)
    draws = {k: resampled(values, lambda x, k=k: stats(x)[k], np.random.default_rng(seed), resamples, block=1)
             for k in point}
    tail = 100 * (1 - level) / 2

    def interval(k: str) -> tuple[float, float, float]:
        d = draws[k]
        if not np.isfinite(point[k]) or not np.isfinite(d).all():
            return point[k], float("nan"), float("nan")
        lo, hi = np.percentile(d, [tail, 100 - tail])
        return point[k], float(min(lo, point[k])), float(max(hi, point[k]))

    ratio, period, machine = interval("ratio"), interval("period"), interval("machine")
    busy, runq = interval("busy"), interval("runq")
    _, lo, hi = ratio
    verdict, reason = UNDECIDED, ""
    # a large change is no comparison even where its own interval is wide (noise is no verdict)
    if abs(machine[0]) > BAND * abs(period[0]):
        reason = (f"the machine changed: without the fault the device ran {busy[0]:+.3f} ms a step and the host "
                  f"waited {runq[0]:+.3f} ms a step in the run queue")
    elif not (np.isfinite(lo) and np.isfinite(hi)) or period[1] <= 0:
        reason = "no gain measured"
    elif 1 - BAND <= lo and hi <= 1 + BAND:
        verdict = WITHIN
    elif hi < 1 - BAND or lo > 1 + BAND:
        verdict = OUTSIDE
    else:
        reason = "the ratio's interval straddles an edge of the band"
    return Verdict(interval("charge"), period, interval("idle"), busy, runq, ratio, verdict, reason, len(values))
