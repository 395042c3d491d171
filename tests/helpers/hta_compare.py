"""Holistic Trace Analysis (HTA) and photon_trace on the same profiler trace, stream by stream.

HTA's ``get_idle_time_breakdown`` splits each stream's idle (the gaps between consecutive
kernels, memcpys and memsets, in µs) into host_wait (the next op's launch call began after
the previous op ended), kernel_wait (other gaps under ``consecutive_kernel_delay``, 30 µs)
and other. With two or more ProfilerSteps HTA first drops every op launched from the last
step on (its ``include_last_profiler_step=False``); ``hta_window`` applies that same cut to
our records so the two are compared over the same ops.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

from photon_trace.telemetry.analysis.bubbles import device_gaps
from photon_trace.telemetry.analysis.streams import StreamStats, stream_stats
from photon_trace.telemetry.trace.lanes import on_stream
from photon_trace.telemetry.trace.records import Trace

_STEP = re.compile(r"ProfilerStep\s*#\s*\d+")


def hta_idle(path: Path) -> dict[int, dict[str, float]]:
    """HTA's idle per stream: {stream: {"host_wait", "kernel_wait", "other": µs}}."""
    from hta.trace_analysis import TraceAnalysis
    logging.getLogger("hta").setLevel(logging.ERROR)
    ta = TraceAnalysis(trace_files={0: path.name}, trace_dir=str(path.parent))
    df, _ = ta.get_idle_time_breakdown(visualize=False)
    out: dict[int, dict[str, float]] = {}
    for row in df.itertuples():
        out.setdefault(int(row.stream), {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0})
        out[int(row.stream)][row.idle_category] = float(row.idle_time)
    return out


def hta_window(trace: Trace) -> Trace:
    """``trace`` with only the device ops HTA keeps: those launched before the last ProfilerStep began."""
    steps = [h.t0 for h in trace.host_spans if _STEP.fullmatch(h.phase)]
    if len(steps) < 2:
        return trace
    last = max(steps)
    return dataclasses.replace(trace, device_spans=[d for d in trace.device_spans if d.enqueued < last])


def ours(trace: Trace) -> dict[str, tuple[StreamStats, int]]:
    """Per stream: our StreamStats over the stream's whole span, and the idle in gaps whose next op
    was launched after the gap opened (the gaps HTA calls host_wait), ns."""
    extent = (min(d.t0 for d in trace.device_spans), max(d.t1 for d in trace.device_spans))
    out = {}
    for s in stream_stats(trace, extent):
        view = on_stream(trace, s.stream)
        late = sum(g.t1 - g.t0 for g in device_gaps(view, extent) if g.next.enqueued > g.prev.t1)
        out[s.stream] = (s, late)
    return out


def stream_number(name: str) -> int:
    """``gpu0 stream 7`` -> 7 (HTA's stream id)."""
    return int(name.rsplit(" ", 1)[1])
