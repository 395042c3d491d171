"""Recording a run: the ``RecordingTracer`` (``recorder``) behind the tracer interface, its ring
tuples converted to records (``convert``), and the sinks it feeds on their own threads
(``sinks``, ``sink_port``, ``sink_set``; the trace file's writer, ``file_writer``); NVTX ranges
(``nvtx``) and PyTorch profiler ranges (``profiler_ranges``) beside it.

It imports the tracer interface and the trace layer (``trace/``), nothing else of telemetry.
"""
