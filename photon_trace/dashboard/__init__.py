"""The Dash dashboard over traces: pure figure builders (``timeline``, ``panels``), trace
sources (``sources``), the app (``app.create_app``) and its CLI wiring (``cli``).

Importing the package loads nothing heavy and registers nothing."""
from __future__ import annotations

__all__ = ["add_dashboard_parser", "run_dashboard", "create_app"]


def __getattr__(name: str):
    if name in ("add_dashboard_parser", "run_dashboard"):
        from photon_trace.dashboard import cli
        return getattr(cli, name)
    if name == "create_app":
        from photon_trace.dashboard.app import create_app
        return create_app
    raise AttributeError(name)
