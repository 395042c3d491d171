"""A table as one Dash component: its HTML, built and escaped here, put in place by the page.

Dash's renderer wires every component it is sent into its store, and each update walks them:
a table of html.Tr and html.Td costs a component per cell, and the Panels tab of a two-rank
job (about 4,000 of them) took 48 s to appear in headless Chromium on a 2-core machine. Here
a table is one ``html.Div`` whose ``data-html`` holds the table's markup; ``assets/raw_html.js``
sets it as the element's content when the element appears or the attribute changes.

Every string in it is escaped (``html.escape``): a trace's names and call sites are shown as
written, never as markup. Styles are classes (``assets/dashboard.css``), not a style per cell.
"""
from __future__ import annotations

from html import escape

from dash import html

from photon_trace.dashboard.glossary import define

# A verdict's colour, and whether it is a verdict to read first (bold).
VERDICT = {"better": ("#1b7f3b", True), "worse": ("#b00020", True), "same": ("#666", False),
           "within noise": ("#666", False), "no clear change": ("#666", False), "not valid": ("#b00020", False)}


def raw_table(rows: list[dict[str, str]], table_id: str | None = None, *, clickable: bool = False,
              highlight: int | None = None) -> html.Div:
    """``rows`` (dicts of one shape; keys starting with ``_`` are not shown) as a table with
    id ``table_id``, each header titled with its definition; ``clickable`` rows carry
    ``data-row`` (their index) for the page's click listener; row ``highlight`` is marked."""
    cols = [c for c in rows[0] if not c.startswith("_")]
    out = [f'<table class="pt-table"{_attr("id", table_id)}><thead><tr>']
    out += [f'<th{_attr("title", define(c))}>{escape(str(c))}</th>' for c in cols]
    out.append("</tr></thead><tbody>")
    for n, r in enumerate(rows):
        cls = "pt-row-click" if clickable else ""
        if highlight == n:
            cls += " pt-highlight"
        attrs = _attr("class", cls.strip() or None)
        if clickable:
            attrs += f' data-row="{n}" title="show it on the timeline"'
        out.append(f"<tr{attrs}>")
        for c in cols:
            out.append(f"<td{_verdict(r[c]) if c == 'verdict' else ''}>{escape(str(r[c]))}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return html.Div(className="pt-html", **{"data-html": "".join(out)})


def _attr(name: str, value: str | None) -> str:
    return f' {name}="{escape(value, quote=True)}"' if value is not None else ""


def _verdict(value: str) -> str:
    if value not in VERDICT:
        return ""
    colour, bold = VERDICT[value]
    return f' style="color: {colour}; font-weight: {600 if bold else 400}"'
