"""The page: its layout, and the small renderers (tables, cards, boxes) the callbacks fill it with.

Every card and table header carries its definition (``glossary.py``) as a hover title.
"""
from __future__ import annotations

import uuid
from pathlib import Path

from dash import dcc, html

from photon_trace.dashboard.glossary import define
from photon_trace.dashboard.help import help_overlay
from photon_trace.dashboard.panels import figures
from photon_trace.dashboard.raw_table import raw_table
from photon_trace.dashboard.timeline.figure import placeholder_figure

# No "Share chart" (plotly.js shows it by default: it uploads the figure, trace data and all,
# to Plotly Cloud), and no cloud URL for anything else to use.
GRAPH_CONFIG = {"displaylogo": False, "scrollZoom": True, "showSendToCloud": False, "showEditInChartStudio": False,
                "plotlyServerURL": "",
                "modeBarButtonsToRemove": ["lasso2d", "autoScale2d", "sendChartToCloud"]}
PAGE = {"fontFamily": "Inter, Segoe UI, Helvetica, Arial, sans-serif", "margin": "0 auto",
        "padding": "12px 20px", "maxWidth": "1800px", "color": "#222"}
ROW = {"display": "flex", "gap": "10px", "alignItems": "center", "flexWrap": "wrap", "marginBottom": "8px"}
ERROR = {"background": "#fdecea", "border": "1px solid #f5c2c0", "color": "#8a1c16", "padding": "8px 12px",
         "borderRadius": "4px", "margin": "6px 0", "whiteSpace": "pre-wrap"}
NOTE = {"background": "#fff8e1", "border": "1px solid #f3e0a0", "padding": "6px 12px", "borderRadius": "4px",
        "margin": "6px 0", "fontSize": "13px"}
CARD = {"border": "1px solid #e3e3e3", "borderRadius": "6px", "padding": "6px 10px", "flex": "1 1 0",
        "minWidth": "90px", "background": "#fafafa"}
TERM = {"borderBottom": "1px dotted #999", "cursor": "help"}
SMALL = {"color": "#666", "fontSize": "12px"}


def table(rows: list[dict[str, str]], table_id: str | None = None, empty: str = "none",
          clickable: bool = False, highlight: int | None = None):
    """A table whose headers carry their definitions; ``clickable`` rows carry their index
    (``data-row``) for the page's one click listener (``assets/keys.js``). One Dash component
    holding the table's markup (``raw_table``: why), or ``empty`` when there are no rows."""
    kw = {"id": table_id} if table_id else {}
    if not rows:
        return html.Div(empty, style={"color": "#777", "fontSize": "13px"}, **kw)
    return raw_table(rows, table_id, clickable=clickable, highlight=highlight)


def summary_cards(report, stale: bool = False, ranks=None) -> list:
    if report is None:   # drawn before the analysis finished
        return [html.Div([html.Div("analysis", style={"fontSize": "12px", "color": "#666"}),
                          html.Div("analysing…", style={"fontSize": "18px", "fontWeight": 600}, id="summary-pending")],
                         style=CARD, className="pt-card", title="The timeline is drawn from the loaded spans; the "
                                                                 "analysis (bubbles, causes, cards) is still running.")]
    return [html.Div([html.Div(item["label"], style={"fontSize": "12px", "color": "#666", **TERM},
                               title=define(item["label"])),
                      html.Div(item["value"], style={"fontSize": "18px", "fontWeight": 600},
                               id=f"summary-{item['key']}")],
                     style=CARD, title=define(item["label"]), className="pt-card")
            for item in figures.summary_items(report, ranks)]


def section(title: str, *children, help_text: str | None = None) -> html.Div:
    head = html.H4(title, style={"margin": "14px 0 6px", **(TERM if help_text else {})}, title=help_text or "")
    return html.Div([head, *children])


def error_box(message: str | None, notes: list[str] = ()) -> list:
    out = []
    if message:
        out.append(html.Div(message, className="pt-error", role="alert", style=ERROR))
    out += [html.Div(n, className="pt-note", style=NOTE) for n in notes]
    return out


def fields_table(fields: list[tuple[str, str]], table_id: str) -> html.Table:
    # the tables' styles (assets/dashboard.css), with the field names as a plain first column
    return html.Table(html.Tbody([html.Tr([html.Th(k), html.Td(v)]) for k, v in fields]),
                      className="pt-table pt-fields", id=table_id)


def timeline_tab(live: bool) -> dcc.Tab:
    controls = html.Div(style={**ROW, "fontSize": "13px"}, children=[
        html.Span("x axis", style=SMALL),
        dcc.RadioItems(id="axis-mode", value="window", inline=True, inputStyle={"marginRight": "3px"},
                       labelStyle={"marginRight": "10px"},
                       options=[{"label": "time from window start", "value": "window"},
                                {"label": "time from trace start (Perfetto ts)", "value": "trace"},
                                {"label": "step", "value": "step"}]),
        dcc.Input(id="goto-step", type="number", placeholder="go to step N", debounce=True,
                  style={"width": "120px"}),
        dcc.Input(id="search", type="text", placeholder="search: op name, step or call site", debounce=True,
                  style={"width": "280px"}),
        html.Button("▶ follow", id="follow", n_clicks=0, style={"display": "inline-block" if live else "none"},
                    title="resume following the live trace (zooming or selecting pauses it)"),
        html.Span(id="search-summary", style=SMALL),
        html.Button("? keys and colours", id="help-button", n_clicks=0, title="the keys, and what each colour means (?)"),
    ])
    return dcc.Tab(label="Timeline", value="timeline", children=[
        html.Div(id="fix-first", style={"margin": "6px 0"}),
        controls,
        html.Div(id="search-hits", style={"display": "flex", "gap": "6px", "flexWrap": "wrap", "fontSize": "12px"}),
        dcc.Graph(id="overview", config={"displayModeBar": False}, figure=placeholder_figure("", 60),
                  style={"height": "70px"}),
        dcc.Graph(id="timeline", config=GRAPH_CONFIG, figure=placeholder_figure("loading…")),
        html.Div("Drag to zoom (x only), scroll to zoom, double-click to reset; keys W/S zoom and A/D pan as in "
                 "Perfetto; ? shows the keys and what each colour means. Click a span, bubble or ▼ sync for its details; use the box-select tool to get "
                 "statistics of a time range. Zoomed out, spans under a pixel are summed per pixel column "
                 "(a block's height is the share of that column they occupy: nothing is widened). ▼ marks an "
                 "accidental sync, the dotted line the bubble it caused; the shaded edges are outside the "
                 "analysis window (drawn alike, not counted).", style=SMALL),
        html.Div(style={"display": "flex", "gap": "24px", "flexWrap": "wrap"}, children=[
            html.Div(id="details", style={"flex": "1 1 640px", "minWidth": "0"}),
            html.Div(id="range-stats", style={"flex": "1 1 560px", "minWidth": "0"}),
        ]),
    ])


def _as_typed(folder: Path) -> str:
    """An allowed folder as a path typed in the box would name it: relative to the server's
    working directory (which the box resolves paths against) when it lies inside it."""
    return folder.relative_to(Path.cwd()).as_posix() if folder.is_relative_to(Path.cwd()) else str(folder)


def page(store, live: str | None, follower, opts: list[dict], a: str | None, b: str | None) -> html.Div:
    return html.Div(style=PAGE, children=[
        html.Div(style={**ROW, "justifyContent": "space-between"}, children=[
            html.H2("photon_trace · where the device waits", style={"margin": "4px 0"}),
            html.Span("", id="live-status", style={"color": "#1b7f3b", "fontSize": "13px"}),
        ]),
        html.Div(style=ROW, children=[
            html.Label("trace A", htmlFor="trace-a"),
            dcc.Dropdown(id="trace-a", options=opts, value=a, clearable=False,
                         style={"width": "520px"}, placeholder="pick a trace"),
            html.Label("compare with B", htmlFor="trace-b"),
            dcc.Dropdown(id="trace-b", options=opts, value=b, style={"width": "520px"},
                         placeholder="pick a second trace to compare"),
        ]),
        html.Div(style=ROW, children=[
            dcc.Input(id="path-input", type="text", placeholder="or a path inside the traces folders…",
                      style={"width": "520px"}, debounce=False, n_submit=0),
            html.Button("open as A", id="open-a", n_clicks=0),
            html.Button("open as B", id="open-b", n_clicks=0),
            html.Span(f"allowed: {', '.join(_as_typed(d) for d in store.allowed)}", style=SMALL),
        ]),
        html.Div(id="path-error"),
        html.Div(id="load-error"),
        html.Div(id="summary", style={**ROW, "alignItems": "stretch"}),
        dcc.Tabs(id="tabs", value="timeline", children=[
            timeline_tab(follower is not None),
            dcc.Tab(label="Panels", value="panels", children=[
                dcc.Graph(id="steps-fig", config=GRAPH_CONFIG, figure=placeholder_figure("loading…")),
                html.Div(id="panel-tables"),
            ]),
            dcc.Tab(label="Compare", value="compare", children=[
                html.Div(id="compare-error"),
                dcc.Graph(id="compare-timeline", config=GRAPH_CONFIG,
                          figure=placeholder_figure("pick trace B to compare")),
                html.Div(style={"display": "flex", "gap": "30px", "flexWrap": "wrap"}, children=[
                    html.Div(id="compare-summary", style={"flex": "1 1 600px"}),
                    html.Div(id="cost-model", style={"flex": "1 1 400px"}),
                ]),
            ]),
        ]),
        dcc.Interval(id="live-tick", interval=500, disabled=follower is None),
        dcc.Interval(id="pending-tick", interval=250, disabled=True),   # a trace still loading or being analysed
        dcc.Store(id="zoom-a"), dcc.Store(id="zoom-compare"), dcc.Store(id="live-version"),
        dcc.Store(id="zoom-draw"),   # a zoom's drawing on its way to the timeline (assets/clientside.js: apply_zoom)
        dcc.Store(id="live-draw"),   # a live re-draw on its way to the timeline (assets/clientside.js: apply_live)
        dcc.Store(id="view-a", data={"range": None, "axis": "window", "version": None}),
        dcc.Store(id="selection-a"), dcc.Store(id="hidden-a", data=[]), dcc.Store(id="hits-a", data=[]),
        dcc.Store(id="load-state"), dcc.Store(id="row-click"),
        dcc.Store(id="follow-state", data={"on": follower is not None, "page": uuid.uuid4().hex}),
        help_overlay(),
    ])

