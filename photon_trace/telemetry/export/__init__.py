"""A trace in other tools' formats: Chrome/Perfetto trace-event JSON (``perfetto``) and
OpenTelemetry spans over OTLP/HTTP (``otlp``: a recorder sink, or a whole loaded trace).

Exporters read the trace layer and the analysis (bubbles, causes); the rest of telemetry
never reads them, except the tracer setup, which builds the OTLP sink when asked.
"""
