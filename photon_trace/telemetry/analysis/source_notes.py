"""What a reader of any report must know about where a trace came from, as notes.

One list for ``check``, ``import`` and the dashboard: records the recorder dropped, an Nsight
export's doubled rows, a damaged, truncated or stopped-early trace, ops overlapping on one stream
(programmatic dependent launch: counted, not damage), what a trace's CUDA graphs did (a
capture that never ran is no picture of the device at work), and a runtime whose syncs the
importer cannot read (then they are unknown, not zero).
"""
from __future__ import annotations

from photon_trace.telemetry.trace.importers.kineto_graphs import graph_line
from photon_trace.telemetry.trace.importers.kineto_order import overlap_line
from photon_trace.telemetry.trace.importers.runtime_calls import UNKNOWN
from photon_trace.telemetry.trace.records import Trace


NO_DEVICE_ACTIVITY = {
    "kineto": "the trace has no kernel, memcpy or memset (recorded without ProfilerActivity.CUDA, or where "
              "there was no GPU)",
    "nsys": "the report has runtime calls but no kernel, memcpy or memset (CUDA activity was not traced: "
            "nsys profile --trace=cuda)",
}
"""Why an imported trace without device ops cannot be gated, by its source format."""


def capture_only(trace: Trace) -> bool:
    """A profiler trace of CUDA-graph captures and no replay: its device idle is no verdict."""
    return bool(((trace.header.get("source") or {}).get("graphs") or {}).get("capture_only"))


def unknown_runtime(trace: Trace) -> str | None:
    """Why the trace's host waits cannot be read (a runtime this importer does not know), or None."""
    runtime = (trace.header.get("source") or {}).get("runtime") or {}
    if runtime.get("name") != UNKNOWN:
        return None
    return runtime.get("why") or "an unknown runtime"


def stopped_early(trace: Trace) -> str | None:
    """Why the trace's writer stopped before its end (its file's stopped line), in words; None
    when it did not."""
    stopped = trace.header.get("stopped")
    if not isinstance(stopped, dict):
        return None
    why, error = stopped.get("why", "a write failed"), stopped.get("error")
    records = sum(n for n in (stopped.get("records") or {}).values() if isinstance(n, int))
    return (f"the trace stopped early: {why}{f' ({error})' if error else ''}, after {records} records; "
            f"what was written before is whole")


def source_notes(trace: Trace, *, problems: bool = True) -> list[str]:
    """The notes every report of ``trace`` shows beside its figures (``problems=False``: not the
    damage a profiler trace's reader found, which a caller showing its warnings has said)."""
    h = trace.header
    notes = []
    dropped = {k: v for k, v in (h.get("dropped") or {}).items() if v}
    if dropped:
        notes.append(f"the recorder dropped records ({dropped}): idle may be overstated")
    source = h.get("source") or {}
    if source.get("format") == "nsys" and source.get("duplicate_runtime_rows"):
        notes.append(f"Nsight export: {source['duplicate_runtime_rows']} runtime calls recorded twice under one "
                     f"correlation id, counted once")
    if source.get("format") == "kineto":
        if h.get("truncated") and problems:
            notes.append("the profiler trace is truncated: checked up to its last complete event")
        for kind, p in (source.get("problems") or {}).items() if problems else ():
            notes.append(f"profiler trace: {p['count']} x {kind} (first: {p['first']})")
        notes += [overlap_line(lane, o) for lane, o in (source.get("stream_overlaps") or {}).items()]
        line = graph_line(source.get("graphs") or {})
        if line:
            notes.append(line)
        why = unknown_runtime(trace)
        if why:
            notes.append(f"host waits on the device: unknown: {why}; its syncs are not read")
    elif stopped_early(trace):
        notes.append(f"{stopped_early(trace)}: checked what is there")
    elif h.get("truncated") or h.get("incomplete"):
        notes.append("the trace file is truncated (the run crashed or was still writing): "
                     "checked what is there")
    return notes
