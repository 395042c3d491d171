"""The HTTP server: an OpenAI-compatible API over one engine thread.

``create_app`` builds the FastAPI app; ``add_serve_parser`` / ``run_serve`` are the
``photon-trace serve`` subcommand. Files: ``app`` (routes), ``loop`` (the engine
thread), ``state`` (what the routes share: submit, wait, abort), ``protocol`` (request
and response shapes), ``validate`` (value rules),
``streaming`` (server-sent events), ``metrics`` and ``device_stats`` (Prometheus),
``errors`` (the OpenAI error body), ``testing`` (a uvicorn server on a thread).
"""
from __future__ import annotations

from .cli import add_serve_parser, run_serve


def create_app(*args, **kwargs):
    """See ``photon_trace.server.app.create_app`` (imported on first use: FastAPI is not light)."""
    from .app import create_app as _create_app
    return _create_app(*args, **kwargs)


__all__ = ["add_serve_parser", "create_app", "run_serve"]
