"""A trace's strings as Plotly text: shown as written, never as markup.

Plotly draws labels, legends, annotations and hovers with a subset of HTML (``<a href>``
makes a live link, ``<span style>`` styles, ``<br>`` breaks a line), and a trace's names are
whatever its writer put there: a thread named ``<a href=...>`` would become a link in its
lane label. So every string a trace supplies (names of threads, streams, phases and ops, call
sites, reasons, file names, messages quoting them) enters a figure through ``plain``; the
figure builders' own markup (``<b>``, ``<br>`` in a hover template) is the only markup.
Dash's HTML components need none of this: React escapes their text. The Perfetto export is
JSON for another viewer and stays raw.
"""
from __future__ import annotations

import html


def plain(text: object) -> str:
    """``text`` as Plotly shows it literally: ``&``, ``<``, ``>`` as entities (which Plotly
    decodes for display), and each line break as Plotly's ``<br>``."""
    return "<br>".join(html.escape(line, quote=False) for line in str(text).split("\n"))
