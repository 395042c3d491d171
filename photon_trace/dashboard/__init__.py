"""The Dash dashboard over traces: the timeline (``timeline/``: its data, drawing, overview
strip and view), the panels beside it (``panels/``: figures, statistics, search, selection),
where traces come from (``sources/``: files, live), the callbacks that wire them to the page
(``callbacks/``) and the app (``app.create_app``, ``layout``, ``glossary``, ``assets/``);
``photon-trace dashboard`` runs it (``cli/dashboard.py``).

Importing the package loads nothing heavy and registers nothing."""
from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str):
    if name == "create_app":
        from photon_trace.dashboard.app import create_app
        return create_app
    raise AttributeError(name)
