"""Where a trace's times are read from: its origin, and the host span open at an instant.

The Perfetto export and the dashboard read a trace on the same clock: ts = 0 is the
trace's first record (``trace_origin_ns``), and a device op's flow arrow starts at the host
span that was issuing it when it was enqueued (``issuer``). Both live here, in the trace
layer, so the dashboard's times and arrows match the export's without importing it.
"""
from __future__ import annotations

from photon_trace.telemetry.trace.columns import column
from photon_trace.telemetry.trace.records import HostSpan, Trace
from photon_trace.telemetry.tracer import Phase


def trace_origin_ns(trace: Trace) -> int:
    """Monotonic ns of ts = 0 in the export: the trace's first record (the dashboard's
    "trace start" axis uses the same origin, so its times match Perfetto's)."""
    firsts = [int(column(records, name).min()) for records, name in
              ((trace.host_spans, "t0"), (trace.device_spans, "t0"), (trace.waits, "t0"), (trace.requests, "t"))
              if len(records)]
    return min(firsts) if firsts else int(trace.header.get("clock", {}).get("mono_ns", 0) or 0)


def issuer(spans, t: int) -> HostSpan | None:
    """The deepest host span of a step containing time ``t``, else the step's launch."""
    best = None
    for s in spans:
        if s.t0 <= t <= s.t1 and (best is None or s.t1 - s.t0 < best.t1 - best.t0):
            best = s
    if best is None:
        best = next((s for s in spans if s.phase == Phase.LAUNCH.span_name), None)
    return best
