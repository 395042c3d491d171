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
from collections.abc import Sequence
from statistics import median

import numpy as np

from photon_trace.telemetry.analysis.gaps import Ops, stream_mask
from photon_trace.telemetry.trace.columns import column
from photon_trace.telemetry.trace.distinct import distinct
from photon_trace.telemetry.trace.lanes import COMPUTE, COPY, IMPORTED_STEP, primary_stream
from photon_trace.telemetry.trace.records import DeviceSpan, StepRecord, Trace

__all__ = ["COMPUTE", "COPY", "compute_ops", "step_starts", "compute_extent", "steady_state_window"]


def compute_ops(trace: Trace) -> Sequence[DeviceSpan]:
    """Compute-stream ops in start order (``Columns`` for a trace held as columns)."""
    return Ops(trace).records()


def _primary(trace: Trace, *fields: str) -> list[np.ndarray]:
    """``fields`` of the compute-stream ops, as arrays in the trace's order."""
    mine = stream_mask(trace.device_spans, primary_stream(trace))
    return [column(trace.device_spans, f)[mine] if len(mine) else np.empty(0, np.int64) for f in fields]


def step_starts(trace: Trace) -> list[tuple[int, int]]:
    """``(t0, step)`` per step that ran on the compute stream: its first compute op's start, in time order."""
    t0, step = _primary(trace, "t0", "step")
    by_step = np.lexsort((t0, step))
    t0, step = t0[by_step], step[by_step]
    first = np.ones(len(step), dtype=bool)
    first[1:] = step[1:] != step[:-1]
    t0, step = t0[first], step[first]
    order = np.lexsort((step, t0))
    return list(zip(t0[order].tolist(), step[order].tolist()))


def compute_extent(trace: Trace) -> tuple[int, int]:
    """First compute op start to last compute op end; (0, 0) without any."""
    t0, t1 = _primary(trace, "t0", "t1")
    if not len(t0):
        return (0, 0)
    return (int(t0.min()), int(t1.max()))


def _kind(rec: StepRecord | None, prefill: bool) -> str:
    if rec is not None:
        return rec.kind
    return "prefill" if prefill else "decode"


def steady_state_window(trace: Trace, *, warmup_steps: int = 2, warmup_frac: float = 0.05) -> tuple[int, int]:
    """``(t0, t1)`` of the steady state (see the module docstring for the rule)."""
    starts = step_starts(trace)
    extent = compute_extent(trace)
    if not starts:
        return extent
    if trace.steps and all(r.kind == IMPORTED_STEP for r in trace.steps):
        return _imported_window(trace, starts, extent)
    records = {r.step: r for r in trace.steps}
    steps = [s for _, s in starts]
    prefill = set(prefill_steps(trace).tolist())
    kinds = [_kind(records.get(s), s in prefill) for s in steps]
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
    t1, step = _primary(trace, "t1", "step")
    return (first, int(t1[step >= 0].max()))


def prefill_steps(trace: Trace) -> np.ndarray:
    """The steps with a ``prefill`` op on the compute stream."""
    op, step = _primary(trace, "op", "step")
    return distinct(step[op == "prefill"]) if len(op) else np.empty(0, np.int64)
