"""Telemetry: the tracer interface the engine calls (``tracer``), the recorder and its sinks,
trace files, NVTX, Perfetto and OpenTelemetry export, the analysis and the CI check.
Optional dependencies (nvtx, opentelemetry) are imported where they are used."""
