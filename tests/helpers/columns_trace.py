"""Traces of millions of spans held as ``Columns``, built in numpy without a tuple per record.

A real simulated run (``helpers.loop_sim``: a pipelined loop with the mask-upload sync, at ON
level, ~10 spans a step) is read once into columns, then its arrays are repeated end to end:
each copy shifted by the run's length in time and by its step count and request ids, so the
result is one long run of the same shape (phases, ops on two streams, waits, steps, requests)
with no Python object per record. What the dashboard at 10M spans is measured and tested on.

    trace = tiled_trace(2_000_000)
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.records import RECORD_KINDS, DeviceSpan, HostSpan, HostWait, RequestRecord, \
    StepRecord, Trace
from photon_trace.telemetry.tracer import TraceLevel
from helpers.loop_sim import SyntheticRun, synthetic_trace

KINDS = {"host_spans": HostSpan, "device_spans": DeviceSpan, "waits": HostWait, "steps": StepRecord,
         "requests": RequestRecord}
TIME_FIELDS = {"t0", "t1", "enqueued", "t"}
BASE_STEPS = 2_000


@lru_cache(maxsize=2)
def base_run(steps: int = BASE_STEPS) -> Trace:
    """The run that is repeated (shared: do not mutate)."""
    return synthetic_trace(SyntheticRun(steps=steps, requests=3 * steps, depth=2, mask_upload_bug=True,
                                        level=TraceLevel.ON))


def as_columns(trace: Trace) -> Trace:
    """``trace`` with every record list as ``Columns`` (the same records)."""
    return Trace(trace.header, *(Columns.from_records(KINDS[k], getattr(trace, k)) for k in RECORD_KINDS))


def tiled_trace(spans: int, base: Trace | None = None) -> Trace:
    """A trace of about ``spans`` host and device spans: ``base`` (default ``base_run()``)
    repeated end to end, as ``Columns``."""
    base = as_columns(base if base is not None else base_run())
    per = len(base.host_spans) + len(base.device_spans)
    copies = max(1, -(-spans // per))
    t_lo = min(int(base.host_spans.arrays["t0"].min()), int(base.device_spans.arrays["t0"].min()))
    t_hi = max(int(base.host_spans.arrays["t1"].max()), int(base.device_spans.arrays["t1"].max()))
    shift_t = t_hi - t_lo + 1_000_000            # copies 1 ms apart: no span of one overlaps the next
    shift_step = int(base.steps.arrays["step"].max()) + 1
    shift_req = int(base.requests.arrays["req_id"].max()) + 1 if len(base.requests) else 0
    k = np.arange(copies, dtype=np.int64)
    out = {}
    for kind in RECORD_KINDS:
        cols: Columns = getattr(base, kind)
        arrays = {}
        for name, a in cols.arrays.items():
            shift = shift_t if name in TIME_FIELDS else shift_step if name == "step" else \
                shift_req if name == "req_id" else 0
            tiled = np.tile(a, copies)
            if shift:
                tiled += np.repeat(k * shift, len(a))
            arrays[name] = tiled
        out[kind] = Columns(cols.kind, arrays, cols.tables)
    return Trace(dict(base.header), *(out[k] for k in RECORD_KINDS))


def as_lists(trace: Trace) -> Trace:
    """``trace`` with every record list as a plain list of tuples (the same records)."""
    return Trace(trace.header, *(list(getattr(trace, k)) for k in RECORD_KINDS))
