"""The Dash app: a thin layout and callbacks over ``timeline``, ``panels`` and ``sources``.

``create_app`` builds everything; importing this module registers nothing.
"""
from __future__ import annotations

import os
from pathlib import Path

import dash
from dash import Input, Output, State, ctx, dcc, html
from dash.exceptions import PreventUpdate

from photon_trace.dashboard import panels
from photon_trace.dashboard.sources import LiveFollower, Loaded, LoadError, PathRefused, TraceStore
from photon_trace.dashboard.timeline import (View, compare_figure, placeholder_figure, timeline_figure,
                                             x_range_from_relayout)

LIVE = "live"
# Keeps only the x-axis part of a relayout event (zoom, pan, reset). Done in the browser so that
# the events plotly also sends (autosize, legend clicks) never re-trigger, and so cancel, a
# server re-draw that is in flight.
ZOOM_FILTER = r"""function(r) {
  const skip = window.dash_clientside.no_update;
  if (!r) return skip;
  const out = {};
  for (const k of Object.keys(r)) if (/^xaxis2?\.(range|autorange)/.test(k)) out[k] = r[k];
  if (!Object.keys(out).length) return skip;
  out.nonce = Date.now();
  return out;
}"""
# No "Share chart" (plotly.js shows it by default: it uploads the figure, trace data and all,
# to Plotly Cloud), and no cloud URL for anything else to use.
GRAPH_CONFIG = {"displaylogo": False, "scrollZoom": True, "showSendToCloud": False, "showEditInChartStudio": False,
                "plotlyServerURL": "",
                "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d", "sendChartToCloud"]}

PAGE = {"fontFamily": "Inter, Segoe UI, Helvetica, Arial, sans-serif", "margin": "0 auto",
        "padding": "12px 20px", "maxWidth": "1800px", "color": "#222"}
ROW = {"display": "flex", "gap": "10px", "alignItems": "center", "flexWrap": "wrap", "marginBottom": "8px"}
ERROR = {"background": "#fdecea", "border": "1px solid #f5c2c0", "color": "#8a1c16", "padding": "8px 12px",
         "borderRadius": "4px", "margin": "6px 0", "whiteSpace": "pre-wrap"}
NOTE = {"background": "#fff8e1", "border": "1px solid #f3e0a0", "padding": "6px 12px", "borderRadius": "4px",
        "margin": "6px 0", "fontSize": "13px"}
CARD = {"border": "1px solid #e3e3e3", "borderRadius": "6px", "padding": "6px 10px", "flex": "1 1 0",
        "minWidth": "90px", "background": "#fafafa"}
TABLE = {"borderCollapse": "collapse", "fontSize": "13px", "width": "100%"}
CELL = {"borderBottom": "1px solid #eee", "padding": "3px 8px", "textAlign": "left", "verticalAlign": "top"}
HEAD = {**CELL, "borderBottom": "2px solid #ccc", "background": "#f6f6f6"}
VERDICT = {"better": "#1b7f3b", "worse": "#b00020", "same": "#666"}


# ------------------------------------------------------------------- rendering


def table(rows: list[dict[str, str]], table_id: str | None = None, empty: str = "none") -> html.Div | html.Table:
    kw = {"id": table_id} if table_id else {}
    if not rows:
        return html.Div(empty, style={"color": "#777", "fontSize": "13px"}, **kw)
    cols = list(rows[0])
    body = []
    for r in rows:
        tds = []
        for c in cols:
            style = CELL
            if c == "verdict" and r[c] in VERDICT:
                style = {**CELL, "color": VERDICT[r[c]], "fontWeight": 600}
            tds.append(html.Td(r[c], style=style))
        body.append(html.Tr(tds))
    return html.Table([html.Thead(html.Tr([html.Th(c, style=HEAD) for c in cols])), html.Tbody(body)],
                      style=TABLE, **kw)


def summary_cards(report, prefix: str = "") -> list:
    return [html.Div([html.Div(item["label"], style={"fontSize": "12px", "color": "#666"}),
                      html.Div(item["value"], style={"fontSize": "18px", "fontWeight": 600},
                               id=f"{prefix}summary-{item['key']}")], style=CARD)
            for item in panels.summary_items(report)]


def section(title: str, *children) -> html.Div:
    return html.Div([html.H4(title, style={"margin": "14px 0 6px"}), *children])


def error_box(message: str | None, notes: list[str] = ()) -> list:
    out = []
    if message:
        out.append(html.Div(message, className="pt-error", role="alert", style=ERROR))
    out += [html.Div(n, className="pt-note", style=NOTE) for n in notes]
    return out


BUBBLE_ROWS = 100


def panel_children(loaded: Loaded) -> list:
    r = loaded.report
    n_bubbles = len(r.bubbles or [])
    shown = min(n_bubbles, BUBBLE_ROWS)
    left = html.Div(style={"flex": "1 1 640px", "minWidth": "0"}, children=[
        section("Diagnosis: what to fix first", table(panels.diagnosis_rows(r), "diagnosis-table",
                                                      "no bubbles in the window")),
        section("Accidental syncs by call site", table(panels.sync_rows(r), "sync-table",
                                                       "no accidental syncs")),
        section("Idle by cause", table(panels.bubble_cause_totals(r), "cause-table", "no bubbles")),
    ])
    right = html.Div(style={"flex": "1 1 560px", "minWidth": "0"}, children=[
        section(f"Bubbles, costliest first ({shown} of {n_bubbles:,})",
                html.Div(table(panels.bubble_rows(r, loaded.timeline.origin, BUBBLE_ROWS), "bubble-table",
                               "no bubbles"), style={"maxHeight": "420px", "overflowY": "auto"})),
    ])
    return [html.Div([left, right], style={"display": "flex", "gap": "28px", "flexWrap": "wrap"})]


# ------------------------------------------------------------------------ app


def create_app(paths: list[str], allowed_dirs: list[str], live: str | None,
               *, store: TraceStore | None = None) -> dash.Dash:
    """The dashboard over ``paths`` (the first shown, the second offered for comparison),
    opening only files inside ``allowed_dirs``; ``live`` follows a trace being written
    (a file path, or the server's live URL)."""
    store = store or TraceStore(allowed_dirs)
    follower = LiveFollower(live, store) if live else None
    if follower:
        follower.start()
    initial = [str(Path(p).expanduser().resolve()) for p in paths]
    store.preload(initial[:2])

    def options(extra: list[str] = ()) -> list[dict]:
        seen, out = set(), []
        if follower:
            out.append({"label": f"● live: {live}", "value": LIVE})
        for p in [*extra, *initial, *(str(x) for x in store.listing())]:
            if p not in seen:
                seen.add(p)
                out.append({"label": _short(p, store.allowed), "value": p})
        return out

    def get(path: str | None) -> tuple[Loaded | None, str | None]:
        if not path:
            return None, "no trace selected: pick one above or open a path"
        if path == LIVE and follower:
            loaded = follower.current
            return loaded, (follower.error or "waiting for the first records") if loaded is None else None
        try:
            return store.get(path), None
        except (PathRefused, LoadError) as e:
            return None, str(e)

    app = dash.Dash(__name__, title="photon_trace dashboard", update_title=None,
                    suppress_callback_exceptions=True)

    def layout():
        a = LIVE if follower else (initial[0] if initial else None)
        b = initial[1] if len(initial) > 1 else (initial[0] if follower and initial else None)
        opts = options()
        return html.Div(style=PAGE, children=[
            html.Div(style={**ROW, "justifyContent": "space-between"}, children=[
                html.H2("photon_trace · where the device waits", style={"margin": "4px 0"}),
                html.Span(f"live: following {live} (last {follower.seconds:.0f} s, every second)"
                          if follower else "", id="live-status", style={"color": "#1b7f3b"}),
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
                html.Span(f"allowed: {', '.join(str(d) for d in store.allowed)}",
                          style={"color": "#777", "fontSize": "12px"}),
            ]),
            html.Div(id="path-error"),
            html.Div(id="load-error"),
            html.Div(id="summary", style={**ROW, "alignItems": "stretch"}),
            dcc.Tabs(id="tabs", value="timeline", children=[
                dcc.Tab(label="Timeline", value="timeline", children=[
                    dcc.Graph(id="timeline", config=GRAPH_CONFIG, figure=placeholder_figure("loading…")),
                    html.Div("Drag to zoom (x only), scroll to zoom, double-click to reset; "
                             "zooming re-draws only the visible range. ▼ marks an accidental sync; bubbles "
                             "are shaded on the compute lane by cause (a strip above it when zoomed out, "
                             "where lane heights show each category's share of the time).",
                             style={"color": "#666", "fontSize": "12px"}),
                ]),
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
            dcc.Interval(id="live-tick", interval=1000, disabled=follower is None),
            dcc.Store(id="zoom-a"),
            dcc.Store(id="live-version"),
            dcc.Store(id="zoom-compare"),
        ])

    app.layout = layout

    @app.callback(Output("trace-a", "options"), Output("trace-a", "value"),
                  Output("trace-b", "options"), Output("trace-b", "value"), Output("path-error", "children"),
                  Input("open-a", "n_clicks"), Input("open-b", "n_clicks"), Input("path-input", "n_submit"),
                  State("path-input", "value"), State("trace-a", "value"), State("trace-b", "value"),
                  prevent_initial_call=True)
    def open_path(_a, _b, _enter, text, a, b):
        """Open a typed path as A (button or Enter) or B, if it lies in an allowed folder."""
        if not text:
            raise PreventUpdate
        try:
            p = str(store.check(text.strip()))
        except PathRefused as e:
            return dash.no_update, dash.no_update, dash.no_update, dash.no_update, error_box(str(e))
        opts = options([p])
        if ctx.triggered_id == "open-b":
            return opts, a, opts, p, []
        return opts, p, opts, b, []

    def render_timeline(loaded: Loaded, view: View):
        return timeline_figure(loaded.timeline, view)

    @app.callback(Output("summary", "children"), Output("timeline", "figure"),
                  Output("load-error", "children"), Output("live-version", "data"),
                  Input("trace-a", "value"), Input("live-tick", "n_intervals"), State("live-version", "data"))
    def render_a(path, _tick, seen):
        live_now = path == LIVE and follower is not None
        if ctx.triggered_id == "live-tick" and (not live_now or (follower.version == seen and follower.current)):
            raise PreventUpdate  # nothing new: no work, and no request to cancel a slower one
        version = follower.version if live_now else None
        loaded, err = get(path)
        if loaded is None:
            return [], placeholder_figure(err or "no trace"), error_box(err), version
        fig = render_timeline(loaded, View())
        # Live: a new revision each tick so the view follows the tail; otherwise one per trace.
        fig.update_layout(uirevision=f"live:{_tick}" if live_now else path)
        return (summary_cards(loaded.report), fig,
                error_box(err or (follower.error if live_now else None), loaded.notes), version)

    @app.callback(Output("steps-fig", "figure"), Output("panel-tables", "children"),
                  Input("trace-a", "value"), Input("tabs", "value"), Input("live-version", "data"))
    def render_panels(path, tab, _version):
        if tab != "panels":
            raise PreventUpdate  # drawn when first looked at, not on every page load
        loaded, err = get(path)
        if loaded is None:
            return placeholder_figure(err or "no trace"), []
        return panels.step_series_figure(loaded.report), panel_children(loaded)

    app.clientside_callback(ZOOM_FILTER, Output("zoom-a", "data"), Input("timeline", "relayoutData"),
                            prevent_initial_call=True)
    app.clientside_callback(ZOOM_FILTER, Output("zoom-compare", "data"), Input("compare-timeline", "relayoutData"),
                            prevent_initial_call=True)

    @app.callback(Output("timeline", "figure", allow_duplicate=True), Input("zoom-a", "data"),
                  State("trace-a", "value"), prevent_initial_call=True)
    def zoom_a(relayout, path):
        kind, rng = x_range_from_relayout(relayout)
        if kind is None:
            raise PreventUpdate
        loaded = follower.current if path == LIVE and follower else get(path)[0]
        if loaded is None:
            raise PreventUpdate
        fig = render_timeline(loaded, View(rng) if kind == "range" else View())
        fig.update_layout(uirevision="live:zoom" if path == LIVE else path)
        return fig

    def compare_parts(a: Loaded, b: Loaded, view: View):
        return compare_figure(a.timeline, b.timeline, view, labels=(f"A · {a.label}", f"B · {b.label}"))

    @app.callback(Output("compare-timeline", "figure"), Output("compare-summary", "children"),
                  Output("cost-model", "children"), Output("compare-error", "children"),
                  Input("trace-a", "value"), Input("trace-b", "value"), Input("tabs", "value"),
                  Input("live-tick", "n_intervals"))
    def render_compare(pa, pb, tab, tick):
        if tab != "compare":
            raise PreventUpdate
        if ctx.triggered_id == "live-tick" and (LIVE not in (pa, pb) or (tick or 0) % 5):
            raise PreventUpdate  # a comparison against a live run refreshes every 5 s
        if not pb:
            return placeholder_figure("pick trace B to compare"), [], [], []
        (a, ea), (b, eb) = get(pa), get(pb)
        if a is None or b is None:
            msg = "; ".join(e for e in (ea and f"A: {ea}", eb and f"B: {eb}") if e)
            return placeholder_figure("cannot compare"), [], [], error_box(msg)
        blocking, pipelined, note = panels.blocking_and_pipelined(a.report, b.report,
                                                                  (a.trace.header, b.trace.header))
        try:
            cm = store.cost_model(blocking, pipelined)
            cost = [section("Cost model", html.Div(note, style={"fontSize": "12px", "color": "#666"}),
                            table(panels.cost_model_rows(cm), "cost-model-table")),
                    dcc.Graph(figure=panels.cost_model_figure(cm), config={"displayModeBar": False})]
        except Exception as e:  # a pair the model cannot take (e.g. empty windows) is not fatal
            cost = error_box(f"cost model unavailable: {type(e).__name__}: {e}")
        summary = section("Summary: A vs B", html.Div(f"A = {a.label}    B = {b.label}",
                                                      style={"fontSize": "12px", "color": "#666"}),
                          table(panels.compare_rows(a.report, b.report), "compare-table"))
        return compare_parts(a, b, View()), summary, cost, []

    @app.callback(Output("compare-timeline", "figure", allow_duplicate=True),
                  Input("zoom-compare", "data"), State("trace-a", "value"), State("trace-b", "value"),
                  prevent_initial_call=True)
    def zoom_compare(relayout, pa, pb):
        kind, rng = x_range_from_relayout(relayout)
        if kind is None or not pb:
            raise PreventUpdate
        (a, _), (b, _) = get(pa), get(pb)
        if a is None or b is None:
            raise PreventUpdate
        return compare_parts(a, b, View(rng) if kind == "range" else View())

    return app


def _short(path: str, allowed: list[Path]) -> str:
    p = Path(path)
    for d in allowed:
        if p.is_relative_to(d):
            return f"{d.name}/{p.relative_to(d)}"
    return os.path.basename(path)
