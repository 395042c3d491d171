"""The steady-state window: the part of a run that says what the loop costs.

Like Nsight's and HTA's habit of cutting the first and last iterations, we drop
the edges of a run, but we find them from the step records rather than by count:

* **Warm-up** ends at the first *decode* step whose live batch (rows minus
  zombie rows) has reached the run's typical size (the median live batch of its
  decode steps; steps with no live row never count); the leading prefill/mixed
  steps that fill the batch come before it. We then skip
  ``max(warmup_steps, ceil(warmup_frac * n))`` more steps (2 and 5% by
  default): the first decode steps pay one-off costs (the pipeline filling at
  depth 2, CUDA graph capture, allocator growth).
* **Drain** starts after the last step whose live batch is still at least that
  typical size: the steps after it run a shrinking batch (requests finishing
  with nothing to replace them, the final zombie step) and would flatter the
  period and the idle fraction alike.

The window runs from the first compute op of its first step to the first
compute op of the step after its last one, so every step in it has a complete
period (and the trace's very last step, which has none, is never in it). If
the rule leaves nothing (a very short trace), the window is the whole
compute-stream extent.

"Compute stream" is the trace's primary stream (``trace.lanes.primary_stream``). An imported
trace's steps (kind ``step``) carry no batch size to find warm-up and drain by, and the
profiler's own schedule already left its warm-up out: its window runs from the first
step's first op to the last op of any step (ops launched before the first step are out).
"""
from __future__ import annotations

import math
from statistics import median

from photon_trace.telemetry.trace.lanes import COMPUTE, COPY, IMPORTED_STEP, primary_stream
from photon_trace.telemetry.trace.records import DeviceSpan, StepRecord, Trace

__all__ = ["COMPUTE", "COPY", "compute_ops", "step_starts", "compute_extent", "steady_state_window"]


def compute_ops(trace: Trace) -> list[DeviceSpan]:
    """Compute-stream ops in start order."""
    stream = primary_stream(trace)
    return sorted((d for d in trace.device_spans if d.stream == stream), key=lambda d: (d.t0, d.t1))


def step_starts(trace: Trace) -> list[tuple[int, int]]:
    """``(t0, step)`` per step that ran on the compute stream: its first compute op's start, in time order."""
    stream = primary_stream(trace)
    first: dict[int, int] = {}
    for d in trace.device_spans:
        if d.stream == stream and (d.step not in first or d.t0 < first[d.step]):
            first[d.step] = d.t0
    return sorted((t0, step) for step, t0 in first.items())


def compute_extent(trace: Trace) -> tuple[int, int]:
    """First compute op start to last compute op end; (0, 0) without any."""
    stream = primary_stream(trace)
    ops = [d for d in trace.device_spans if d.stream == stream]
    if not ops:
        return (0, 0)
    return (min(d.t0 for d in ops), max(d.t1 for d in ops))


def _kind(rec: StepRecord | None, ops_kinds: set[str]) -> str:
    if rec is not None:
        return rec.kind
    return "prefill" if "prefill" in ops_kinds else "decode"


def steady_state_window(trace: Trace, *, warmup_steps: int = 2, warmup_frac: float = 0.05) -> tuple[int, int]:
    """``(t0, t1)`` of the steady state (see the module docstring for the rule)."""
    starts = step_starts(trace)
    extent = compute_extent(trace)
    if not starts:
        return extent
    if trace.steps and all(r.kind == IMPORTED_STEP for r in trace.steps):
        return _imported_window(trace, starts, extent)
    records = {r.step: r for r in trace.steps}
    stream = primary_stream(trace)
    op_kinds: dict[int, set[str]] = {}
    for d in trace.device_spans:
        if d.stream == stream:
            op_kinds.setdefault(d.step, set()).add(d.op)

    steps = [s for _, s in starts]
    kinds = [_kind(records.get(s), op_kinds.get(s, set())) for s in steps]
    # A step without a record counts as live at full size: we cannot tell it is draining.
    live = [(r.rows - r.zombie_rows) if (r := records.get(s)) else math.inf for s in steps]
    decode_live = [x for x, k in zip(live, kinds) if k == "decode" and 0 < x < math.inf]
    typical = max(1, median(decode_live)) if decode_live else 1   # an empty step is never steady

    n = len(steps)
    first = next((i for i in range(n) if kinds[i] == "decode" and live[i] >= typical), n)
    first += max(warmup_steps, math.ceil(warmup_frac * n))
    # The trace's last step has no successor, hence no complete period: never in the window.
    last = next((i for i in range(n - 2, -1, -1) if live[i] >= typical), -1)
    if first > last:
        return extent
    return (starts[first][0], starts[last + 1][0])


def _imported_window(trace: Trace, starts: list[tuple[int, int]], extent: tuple[int, int]) -> tuple[int, int]:
    """First op of the first step (>= 0) to the last op of any step; the extent without steps."""
    first = next((t0 for t0, step in starts if step >= 0), None)
    if first is None:
        return extent
    stream = primary_stream(trace)
    end = max(d.t1 for d in trace.device_spans if d.stream == stream and d.step >= 0)
    return (first, end)
