"""photon_trace: a pipelined LLM inference engine that shows where the device waits.

``photon_trace.engine`` (the engine), ``photon_trace.telemetry`` (tracing, trace files,
exporters, analysis), ``photon_trace.dashboard``, ``photon_trace.server``; the
``photon-trace`` command is ``photon_trace.cli``. Importing the package loads nothing.
"""
__version__ = "0.1.0"
