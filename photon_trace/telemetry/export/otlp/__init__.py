"""OpenTelemetry export: the sink (``sink``: which steps are sampled, the request spans), the
spans of a step (``steps``) and of a request (``requests``), and the OTLP/HTTP transport that
encodes in pieces and posts on the sink's thread (``http``).
"""
