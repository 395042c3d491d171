"""Per-step costs: the cost model's terms measured step by step.

* ``forward_ns``: compute ops that run the model (stage, prefill, forward); in an
  imported trace, whose ops are kernels of any name, every op on the stream.
* ``sample_ns``: compute ops that sample (sample, masked_sample).
* ``copy_ns``: the step's ops on the other streams (our copy stream: copy-back, mask
  upload); they overlap compute, so they are not part of the period's busy time.
* ``period_ns``: from the step's first compute op to the next step's (the last
  step of a trace: to its last compute op's end).
* ``bookkeeping_ns``: the host's top-level phases (plan, launch, commit,
  finalize; ``trace.lanes.host_phases``) recorded for the step, less the host waits of that step inside them:
  waiting is the device's time, not the host's work.
* ``idle_ns``: the part of the period with no compute op running (every gap,
  bubbles and dispatch gaps alike) while the engine had work (``report`` passes the gaps
  with their no work cut out), so the steps' idle adds up to the window's.
"""
from __future__ import annotations

from collections import defaultdict
from statistics import median
from typing import NamedTuple

from photon_trace.telemetry.analysis._index import IntervalIndex, overlap
from photon_trace.telemetry.analysis.bubbles import Gap
from photon_trace.telemetry.analysis.window import step_starts
from photon_trace.telemetry.trace.lanes import host_phases, primary_stream
from photon_trace.telemetry.trace.records import Trace

FORWARD_OPS = frozenset({"stage", "prefill", "forward"})
SAMPLE_OPS = frozenset({"sample", "masked_sample"})


class StepStats(NamedTuple):
    step: int
    kind: str
    rows: int
    forward_ns: int
    sample_ns: int
    period_ns: int
    bookkeeping_ns: int
    idle_ns: int
    copy_ns: int
    zombie_rows: int
    tokens: int


def step_periods(trace: Trace) -> list[tuple[int, int, int]]:
    """``(step, start, period_ns)`` for every step that ran on the compute stream, in time order."""
    starts = step_starts(trace)
    stream = primary_stream(trace)
    last_end: dict[int, int] = {}
    for d in trace.device_spans:
        if d.stream == stream:
            last_end[d.step] = max(last_end.get(d.step, d.t1), d.t1)
    out = []
    for i, (t0, step) in enumerate(starts):
        t1 = starts[i + 1][0] if i + 1 < len(starts) else last_end[step]
        out.append((step, t0, t1 - t0))
    return out


def step_stats(trace: Trace, window: tuple[int, int], gaps: list[Gap]) -> list[StepStats]:
    """One row per step whose first compute op starts inside ``window``."""
    w0, w1 = window
    records = {r.step: r for r in trace.steps}
    fwd: dict[int, int] = defaultdict(int)
    smp: dict[int, int] = defaultdict(int)
    cpy: dict[int, int] = defaultdict(int)
    saw_prefill: set[int] = set()
    stream = primary_stream(trace)
    for d in trace.device_spans:
        if d.stream != stream:
            cpy[d.step] += d.t1 - d.t0
        elif d.op in SAMPLE_OPS:
            smp[d.step] += d.t1 - d.t0
        else:  # the model's ops, and every op of an imported trace
            fwd[d.step] += d.t1 - d.t0
            if d.op == "prefill":
                saw_prefill.add(d.step)

    phases: dict[int, list] = defaultdict(list)
    top = host_phases(trace)
    for h in trace.host_spans:
        if h.phase in top:
            phases[h.step].append(h)
    book = {s: sum(h.t1 - h.t0 for h in hs) for s, hs in phases.items()}
    for w in trace.waits:
        for h in phases.get(w.step, ()):
            book[w.step] -= overlap(w.t0, w.t1, h.t0, h.t1)

    gap_index = IntervalIndex(gaps)
    rows = []
    for step, t0, period in step_periods(trace):
        if not w0 <= t0 < w1:
            continue
        idle = sum(overlap(g.t0, g.t1, t0, t0 + period) for g in gap_index.overlapping(t0, t0 + period))
        r = records.get(step)
        kind = r.kind if r else ("prefill" if step in saw_prefill else "decode")
        rows.append(StepStats(
            step=step, kind=kind, rows=r.rows if r else 0,
            forward_ns=fwd[step], sample_ns=smp[step], period_ns=period,
            bookkeeping_ns=max(0, book.get(step, 0)), idle_ns=idle, copy_ns=cpy[step],
            zombie_rows=r.zombie_rows if r else 0, tokens=r.tokens if r else 0))
    return rows


def median_ms(steps: list[StepStats], field: str) -> float:
    """Median of a StepStats field in ms, over decode steps when there are any (the source's tables)."""
    decode = [s for s in steps if s.kind == "decode"] or steps
    return median(getattr(s, field) for s in decode) / 1e6 if decode else 0.0
