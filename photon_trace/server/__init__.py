"""The HTTP server: an OpenAI-compatible API over one engine thread.

``create_app`` builds the FastAPI app (``photon-trace serve`` runs it: ``cli/serve.py``).
Files: ``api`` (the app: middleware, error handlers, routers), ``routes/`` (the handlers,
one module per concern), ``served_engine`` (what the server uses of an engine),
``middleware`` (what every request passes first: request id, Host allowlist, API key,
cross-origin and Content-Type checks, body size, the last-resort 500), ``body`` (JSON
bytes to a checked model), ``loop`` (the engine thread, which heals), ``state`` (what
the routes share: tokenize, submit, wait, abort), ``protocol`` (request and response
shapes), ``validate`` (value rules), ``openapi`` (request bodies in the schema),
``streaming`` (server-sent events), ``metrics`` and ``device_stats`` (Prometheus),
``errors`` (the OpenAI error body).
"""
from __future__ import annotations


def create_app(*args, **kwargs):
    """See ``photon_trace.server.api.create_app`` (imported on first use: FastAPI is not light)."""
    from photon_trace.server.api import create_app as _create_app
    return _create_app(*args, **kwargs)


__all__ = ["create_app"]
