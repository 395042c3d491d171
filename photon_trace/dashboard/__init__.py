"""The Dash dashboard over traces: pure figure builders (``timeline``, ``panels``), trace
sources (``sources``) and the app (``app.create_app``); ``photon-trace dashboard`` runs it
(``cli/dashboard.py``).

Importing the package loads nothing heavy and registers nothing."""
from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str):
    if name == "create_app":
        from photon_trace.dashboard.app import create_app
        return create_app
    raise AttributeError(name)
