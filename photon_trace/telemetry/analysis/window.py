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

import numpy as np

from photon_trace.telemetry.analysis.gaps import Ops, stream_mask
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.distinct import distinct, first_of_each, member
from photon_trace.telemetry.trace.lanes import COMPUTE, COPY, IMPORTED_STEP, primary_stream
from photon_trace.telemetry.trace.records import DeviceSpan, Trace

__all__ = ["COMPUTE", "COPY", "compute_ops", "step_starts", "compute_extent", "steady_state_window"]


def compute_ops(trace: Trace) -> Sequence[DeviceSpan]:
    """Compute-stream ops in start order (``Columns`` for a trace held as columns)."""
    return Ops(trace).records()


def _primary(trace: Trace, *fields: str) -> list[np.ndarray]:
    """``fields`` of the compute-stream ops, as arrays in the trace's order."""
    mine = stream_mask(trace.device_spans, primary_stream(trace))
    return [column(trace.device_spans, f)[mine] if len(mine) else np.empty(0, np.int64) for f in fields]


def _starts(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Each step's first compute op's start and the step, as arrays in time order."""
    t0, step = _primary(trace, "t0", "step")
    by_step = np.lexsort((t0, step))
    t0, step = t0[by_step], step[by_step]
    first = np.ones(len(step), dtype=bool)
    first[1:] = step[1:] != step[:-1]
    t0, step = t0[first], step[first]
    order = np.lexsort((step, t0))
    return t0[order], step[order]


def step_starts(trace: Trace) -> list[tuple[int, int]]:
    """``(t0, step)`` per step that ran on the compute stream: its first compute op's start, in time order."""
    t0, step = _starts(trace)
    return list(zip(t0.tolist(), step.tolist()))


def compute_extent(trace: Trace) -> tuple[int, int]:
    """First compute op start to last compute op end; (0, 0) without any."""
    t0, t1 = _primary(trace, "t0", "t1")
    if not len(t0):
        return (0, 0)
    return (int(t0.min()), int(t1.max()))


def _decode_and_live(trace: Trace, steps: np.ndarray, kind_codes: np.ndarray, kinds: list[str]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Per step of ``steps``: whether it is a decode step, and its live rows (rows minus
    zombie rows). A step's record says both (the last record of a step number wins); a step
    without one is decode unless it ran a prefill op, and counts as live at full size (inf):
    we cannot tell it is draining. ``kind_codes``, ``kinds``: the records' kinds (``codes``).
    Arrays throughout: a 10M-span trace has ~1M steps."""
    decode = ~member(steps, prefill_steps(trace))
    live = np.full(len(steps), math.inf)
    rec_step = column(trace.steps, "step")
    if not len(rec_step) or not len(steps):
        return decode, live
    values, first, _ = first_of_each(rec_step[::-1])     # the first from the end: the last record
    latest = len(rec_step) - 1 - first
    at = np.minimum(np.searchsorted(values, steps), len(values) - 1)
    has = values[at] == steps
    rec = latest[at[has]]
    decode[has] = np.array([k == "decode" for k in kinds], dtype=bool)[kind_codes[rec]]
    live[has] = column(trace.steps, "rows")[rec] - column(trace.steps, "zombie_rows")[rec]
    return decode, live


def steady_state_window(trace: Trace, *, warmup_steps: int = 2, warmup_frac: float = 0.05) -> tuple[int, int]:
    """``(t0, t1)`` of the steady state (see the module docstring for the rule)."""
    t0s, steps = _starts(trace)
    extent = compute_extent(trace)
    if not len(steps):
        return extent
    kind_codes, kinds = codes(trace.steps, "kind")
    if len(kind_codes) and {kinds[c] for c in distinct(kind_codes).tolist()} == {IMPORTED_STEP}:
        return _imported_window(trace, t0s, steps, extent)
    decode, live = _decode_and_live(trace, steps, kind_codes, kinds)
    decode_live = live[decode & (live > 0) & (live < math.inf)]
    typical = max(1, float(np.median(decode_live))) if len(decode_live) else 1   # an empty step is never steady

    n = len(steps)
    steady = live >= typical
    hits = np.flatnonzero(decode & steady)
    first = int(hits[0]) if len(hits) else n
    first += max(warmup_steps, math.ceil(warmup_frac * n))
    # The trace's last step has no successor, hence no complete period: never in the window.
    tail = np.flatnonzero(steady[:n - 1])
    last = int(tail[-1]) if len(tail) else -1
    if first > last:
        return extent
    return (int(t0s[first]), int(t0s[last + 1]))


def _imported_window(trace: Trace, t0s: np.ndarray, steps: np.ndarray, extent: tuple[int, int]) -> tuple[int, int]:
    """First op of the first step (>= 0) to the last op of any step; the extent without steps."""
    stepped = np.flatnonzero(steps >= 0)
    if not len(stepped):
        return extent
    t1, step = _primary(trace, "t1", "step")
    return (int(t0s[stepped[0]]), int(t1[step >= 0].max()))


def prefill_steps(trace: Trace) -> np.ndarray:
    """The steps with a ``prefill`` op on the compute stream."""
    op, step = _primary(trace, "op", "step")
    return distinct(step[op == "prefill"]) if len(op) else np.empty(0, np.int64)
