"""Telemetry, in the order a trace travels: the tracer interface the engine calls
(``tracer``: its one door in), recording a run (``recording/``), the trace as data (``trace/``:
records, the file, importers), its analysis (``analysis/``: bubbles, causes, the CI gate) and
its export (``export/``: Perfetto, OpenTelemetry); ``setup.make_tracer`` assembles the usual
recorder. Optional dependencies (nvtx, opentelemetry) are imported where they are used."""
