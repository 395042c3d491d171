"""``analyze``: every analysis of one trace over one window, gathered in a Report."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from collections.abc import Sequence
from typing import Any

from photon_trace.telemetry.analysis.bubble_table import Bubbles
from photon_trace.telemetry.analysis.bubbles import (
    MIN_BUBBLE_NS, Bubble, busy_intervals, device_gaps, split_table)
from photon_trace.telemetry.analysis.charging import host_work
from photon_trace.telemetry.analysis.clock import clock_error_ns
from photon_trace.telemetry.analysis.device_idle import DeviceIdle, device_idle
from photon_trace.telemetry.analysis.device_spread import DeviceFinding, OpSpread, device_findings, op_spreads
from photon_trace.telemetry.analysis.diagnosis import Diagnosis, diagnose, predict_removal
from photon_trace.telemetry.analysis.gaps import Ops
from photon_trace.telemetry.analysis.launch_latency import LaunchLatency
from photon_trace.telemetry.analysis.no_work import NoWork
from photon_trace.telemetry.analysis.source_notes import unknown_runtime
from photon_trace.telemetry.analysis.split_table import SplitTable
from photon_trace.telemetry.analysis.steps import StepStats, median_ms, step_stats
from photon_trace.telemetry.analysis.streams import StreamStats, stream_stats, with_cover
from photon_trace.telemetry.analysis.syncs import SyncSite, sync_sites
from photon_trace.telemetry.analysis.top_ops import OpTime, top_ops
from photon_trace.telemetry.analysis.window import steady_state_window, step_starts
from photon_trace.telemetry.analysis.zombie_tax import (
    mean_generated_tokens, run_extent, wasted_step_share, zombie_rows, zombie_tax)
from photon_trace.telemetry.trace.lanes import on_stream, primary_stream
from photon_trace.telemetry.trace.records import Trace

Made = tuple[SplitTable, Bubbles, LaunchLatency]
"""``bubbles.split_table``'s answer."""


@dataclass(slots=True)
class Report:
    """The analysis of one trace.

    Window-level (steady state unless a window was given): busy/idle, tokens,
    steps, bubbles, syncs, the medians and the diagnosis. ``window_ns`` =
    ``busy_ns + idle_ns + no_work_ns``: ``no_work_ns`` is the device's idle while the engine
    had nothing to run (``no_work``), no bubble; ``idle_ns`` the idle while it had work, and
    ``idle_fraction`` its share of that time (``work_ns``). ``idle_ns`` = ``bubble_ns +
    dispatch_ns``, and split the other way, ``idle_ns`` = ``host_idle_ns + launch_idle_ns``.
    Run-level (the whole trace): ``e2e_tokens_per_s``, ``run_period_ms``, ``L``, ``zombie_rows``,
    ``z`` and ``z_steps`` (see ``requests``).
    ``stream`` is the stream analysed (``bubbles``, ``steps``, busy and idle are its);
    ``streams`` has a row per stream of the trace (see ``streams``), ``devices`` one per device,
    all its streams together (Nsight's view of idle: ``device_idle``), over the same window.
    ``source`` is the format an imported trace came in (``kineto``, ``nsys``; None for ours: then
    tokens, L and z mean something), ``top_ops`` the op names with the most device time.
    ``syncs_unknown`` says why ``syncs`` cannot be read (a runtime the importer does not know):
    then they are unknown, not none.
    """
    window: tuple[int, int]
    window_ns: int
    busy_ns: int
    idle_ns: int
    idle_fraction: float
    bubble_ns: int          # idle in bubbles (gaps >= the threshold)
    dispatch_ns: int        # idle in shorter gaps: per-command overhead
    host_idle_ns: int       # idle before the next op was enqueued: the host was late
    launch_idle_ns: int     # idle after it was enqueued: the device's launch latency
    queued_gap_ns: int      # the device's own launch latency before a step's first op (launch.LaunchLatency),
                            # which no host fix removes (0: nothing in the trace measures it)
    tokens: int
    tokens_per_s: float
    e2e_tokens_per_s: float
    steps: list[StepStats]
    bubbles: Sequence[Bubble]   # ``analyze``'s as columns (``bubble_table.Bubbles``), read as a list
    syncs: list[SyncSite]
    L: float
    zombie_rows: int
    z: float
    z_steps: float
    period_ms: float        # medians over the window's decode steps
    forward_ms: float
    sample_ms: float
    bookkeeping_ms: float
    mean_period_ms: float   # window / steps: the steady state's period as throughput sees it
    run_period_ms: float    # the whole run / its steps: the period end-to-end throughput sees
    diagnosis: list[Diagnosis]
    host_free_speedup: tuple[float, float, float]   # (point, low, high) were the host never late: every
                                                    # host-made row removed (a blocking run: pipelining)
    settings: dict[str, Any] = field(default_factory=dict)
    # how far any device time may be off the host clock (anchor, drift: ``clock.clock_error_ns``)
    clock_error_ns: int = 0
    stream: str = "compute"
    streams: list[StreamStats] = field(default_factory=list)
    devices: list[DeviceIdle] = field(default_factory=list)
    source: str | None = None
    top_ops: list[OpTime] = field(default_factory=list)
    syncs_unknown: str | None = None    # why the trace's host waits cannot be read (an unknown runtime)
    no_work_ns: int = 0     # idle while the engine had nothing to run: not in idle_ns, bubbles or diagnosis

    @property
    def work_ns(self) -> int:
        """The part of the window the engine had work: what ``idle_fraction`` is a share of."""
        return self.window_ns - self.no_work_ns

    @property
    def no_work_fraction(self) -> float:
        """The part of the window the engine had nothing to run (its device idle, no bubble)."""
        return self.no_work_ns / self.window_ns if self.window_ns else 0.0
    # each device op's spread of durations in the window, and the ops whose slow tail costs
    # device time (``device_spread``): device-side rows, apart from the bubbles' diagnosis
    device_ops: list[OpSpread] = field(default_factory=list)
    device_findings: list[DeviceFinding] = field(default_factory=list)

    @property
    def imported(self) -> bool:
        """An imported trace of another program: no tokens, no requests, steps of its own."""
        return self.source is not None

    @property
    def steps_per_s(self) -> float:
        """Steps (iterations) per second over the window."""
        return len(self.steps) * 1e9 / self.window_ns if self.window_ns and self.steps else 0.0

    @property
    def busy_fraction(self) -> float:
        """The part of the window the analysed stream ran an op (no work included)."""
        return self.busy_ns / self.window_ns if self.window_ns else 0.0

    @property
    def clock_error_us(self) -> float:
        return self.clock_error_ns / 1e3

    @property
    def host_idle_fraction(self) -> float:
        """The part of the time with work the device sat idle because the host was late."""
        return self.host_idle_ns / self.work_ns if self.work_ns else 0.0

    def to_dict(self, *, tables: bool = True) -> dict[str, Any]:
        """JSON-able form; ``tables=False`` leaves out the per-step and per-bubble rows."""
        d = asdict(self)  # NamedTuple rows become lists; rebuild them as dicts
        d["window"] = list(self.window)
        d["steps"] = [s._asdict() for s in self.steps] if tables else len(self.steps)
        d["bubbles"] = [b._asdict() for b in self.bubbles] if tables else len(self.bubbles)
        d["syncs"] = [s._asdict() for s in self.syncs]
        d["streams"] = [{**s._asdict(), "idle_fraction": s.idle_fraction} for s in self.streams]
        d["devices"] = [{**x._asdict(), "idle_fraction": x.idle_fraction} for x in self.devices]
        d["top_ops"] = [x._asdict() for x in self.top_ops]
        d["diagnosis"] = [{**{k: _finite(v) for k, v in x._asdict().items()}, "charged_ns": x.charged_ns}
                          for x in self.diagnosis]
        d["host_free_speedup"] = [_finite(v) for v in self.host_free_speedup]
        d["work_ns"], d["no_work_fraction"] = self.work_ns, self.no_work_fraction
        d["device_ops"] = [x._asdict() for x in self.device_ops]
        d["device_findings"] = [{**x._asdict(), "words": x.words} for x in self.device_findings]
        return d


def _finite(v: Any) -> Any:
    """JSON has no infinity: an unbounded prediction (all of the window idle) is None."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def analyze(trace: Trace, window: tuple[int, int] | None = None, *, stream: str | None = None,
            min_gap_ns: int = MIN_BUBBLE_NS, slack_ns: int | None = None,
            stream_causes: bool | None = None, made: Made | None = None) -> Report:
    """Analyse ``trace`` over ``window`` (default: ``steady_state_window(trace)``), on ``stream``
    (default: the primary stream, ``trace.lanes.primary_stream``).

    ``stream_causes``: split the other streams' idle by cause too. By default only in an
    imported trace (its header names its primary stream), where any stream may be the one
    that matters; our own copy stream is idle by design between copies, and classifying its
    every gap would add half again to the analysis of a long trace.

    ``made``: ``split_table``'s answer for this window's gaps with the default ``min_gap_ns`` and
    ``slack_ns``, where the caller made it already (``check``'s one pass: ``shared_splits``)."""
    if stream is not None:
        trace = on_stream(trace, stream)
    if window is None:
        window = steady_state_window(trace)
    w0, w1 = window
    window_ns = max(0, w1 - w0)
    ops = Ops(trace)
    runs = busy_intervals(trace, window, ops)
    busy = runs.total()
    gaps = device_gaps(trace, window, ops)
    # the splits are read once, as they are made: what the diagnosis needs of them is kept (``SplitTable``)
    splits, bubbles, launch = made or split_table(trace, gaps, min_gap_ns=min_gap_ns, slack_ns=slack_ns)
    stream = primary_stream(trace)
    bubbles = with_cover(trace, bubbles, stream, window)
    launch_ns = launch.typical or 0
    # the device's idle while the engine had nothing to run is no bubble and no fix's (``no_work``)
    no_work = NoWork(trace)
    no_work_ns = no_work.overlap_total(gaps.t0, gaps.t1)
    work_gaps = no_work.cut(gaps)
    work_ns = window_ns - no_work_ns
    idle_of = bubbles.per_row()
    host_rows = {key for key in idle_of if not key[0].queued}
    host_free = predict_removal(splits, work_ns, host_rows, launch_ns)
    bubble_ns = sum(idle_of.values())
    idle = work_ns - busy
    host_idle = work_gaps.host_late_ns()
    steps = step_stats(trace, window, work_gaps)
    tokens = sum(s.tokens for s in steps)
    r0, r1 = run_extent(trace)
    all_tokens = sum(s.tokens for s in trace.steps)
    n_run = len(step_starts(trace))
    spreads = op_spreads(trace, (w0, w1))
    return Report(
        window=(w0, w1), window_ns=window_ns, busy_ns=busy, idle_ns=idle,
        idle_fraction=idle / work_ns if work_ns else 0.0,
        bubble_ns=bubble_ns, dispatch_ns=idle - bubble_ns,
        host_idle_ns=host_idle, launch_idle_ns=idle - host_idle, queued_gap_ns=launch_ns,
        tokens=tokens, tokens_per_s=tokens * 1e9 / window_ns if window_ns else 0.0,
        e2e_tokens_per_s=all_tokens * 1e9 / (r1 - r0) if r1 > r0 else 0.0,
        steps=steps, bubbles=bubbles, syncs=sync_sites(trace, bubbles, window),
        L=mean_generated_tokens(trace), zombie_rows=zombie_rows(trace),
        z=zombie_tax(trace), z_steps=wasted_step_share(trace),
        period_ms=median_ms(steps, "period_ns"), forward_ms=median_ms(steps, "forward_ns"),
        sample_ms=median_ms(steps, "sample_ns"), bookkeeping_ms=median_ms(steps, "bookkeeping_ns"),
        mean_period_ms=window_ns / len(steps) / 1e6 if steps else 0.0,
        run_period_ms=(r1 - r0) / n_run / 1e6 if n_run else 0.0,
        diagnosis=diagnose(splits, work_ns, launch_ns, bubbles, host_work(trace, (w0, w1), busy)),
        host_free_speedup=(host_free.speedup, host_free.low, host_free.high),
        settings=dict(trace.header.get("settings", {})),
        clock_error_ns=clock_error_ns(trace.header),
        stream=stream, streams=stream_stats(trace, window, min_gap_ns=min_gap_ns, slack_ns=slack_ns,
                                            known={stream: (runs, gaps, bubbles)},
                                            causes=bool(trace.header.get("primary_stream"))
                                            if stream_causes is None else stream_causes),
        devices=device_idle(trace, (w0, w1)),
        source=(trace.header.get("source") or {}).get("format"), top_ops=top_ops(trace, (w0, w1)),
        syncs_unknown=unknown_runtime(trace), no_work_ns=no_work_ns,
        device_ops=spreads, device_findings=device_findings(spreads),
    )
