"""The usual tracer setup in one call: the no-op tracer, or a recorder (``recording/``) with
its trace file, OTLP export (``export/otlp/``) and live view as asked.

It sits beside the tracer interface it returns, above both folders it assembles: inside
``recording/`` it would make the recorder's side import the exporters.
"""
from __future__ import annotations

from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.tracer import NULL_TRACER, Tracer, TraceLevel


def make_tracer(level: str | TraceLevel | int = "on", *, path=None, trace_dir="traces", otlp=False,
                live=None, keep: bool = False, header: dict | None = None, **kwargs) -> Tracer:
    """The usual setup: ``"off"`` gives the no-op tracer; otherwise a ``RecordingTracer``
    writing ``path`` (default: a new file under ``trace_dir``; ``path=False`` for none),
    exporting over OTLP when ``otlp`` (True, or an ``OtelSink``), feeding ``live`` (a
    ``LiveBuffer``) when given. ``kwargs`` go to ``RecordingTracer``."""
    if isinstance(level, str):
        level = TraceLevel[level.upper()]
    level = TraceLevel(level)
    if level == TraceLevel.OFF:
        return NULL_TRACER
    from photon_trace.telemetry.recording.file_writer import TraceFileWriter
    from photon_trace.telemetry.trace.file import default_trace_path

    sinks: list = []
    if path is not False:
        sinks.append(TraceFileWriter(path if path is not None else default_trace_path(trace_dir)))
    if otlp:
        from photon_trace.telemetry.export.otlp.sink import OtelSink
        sinks.append(otlp if isinstance(otlp, OtelSink) else OtelSink())
    if live is not None:
        sinks.append(live)
    return RecordingTracer(level, sinks=sinks, keep=keep, header=header, **kwargs)
