"""Callbacks that select and navigate: clicks on the timeline, range selection, the overview
strip, "go to step", search hits, bubble-table and diagnosis rows; and the details and
range-statistics panels that show the selection."""
from __future__ import annotations

import dash
import numpy as np
from dash import ALL, Input, Output, State, ctx, html
from dash.exceptions import PreventUpdate

from photon_trace.dashboard.callbacks.timeline import (
    LIVE, draw, focus_range, marks_patch, overview_patch, selection_for_diagnosis)
from photon_trace.dashboard.layout import SMALL, fields_table, section, table
from photon_trace.dashboard.panels import selection
from photon_trace.dashboard.panels.figures import bubble_order, ranked_diagnoses
from photon_trace.dashboard.panels.search import search, step_range
from photon_trace.dashboard.panels.stats import range_stats
from photon_trace.dashboard.timeline.draw import CLICK_BLOCK, CLICK_REQUEST_END, CLICK_REQUESTS, CLICK_SPAN, CLICK_SYNC
from photon_trace.dashboard.timeline.view import View


def selection_from_click(data, click: dict | None, view: dict) -> dict | None:
    """What a click on the timeline selects. A click carries the trace (curve) number and the
    point's x and y; ``view["curves"]`` says what each trace's points stand for, and x and
    the lane (from y) find the span, marker or time."""
    pts = (click or {}).get("points") or []
    curves = view.get("curves") or []
    if not pts or not 0 <= int(pts[0].get("curveNumber", -1)) < len(curves) or not curves[pts[0]["curveNumber"]]:
        return None
    code, k = curves[pts[0]["curveNumber"]]
    axis = view.get("axis", "window")
    t = int(float(pts[0]["x"]) * 1e9 + data.origin_for(axis))
    lane = int(round(-float(pts[0].get("y", 0))))
    if code == CLICK_SPAN and 0 <= k < len(data.sets):
        st = data.sets[k]
        cand = np.flatnonzero((st.lane == lane) & (st.t0 <= t) & (st.t1 >= t))
        if not len(cand):
            on = np.flatnonzero(st.lane == lane)
            cand = on[np.argsort(np.abs((st.t0[on] + st.t1[on]) / 2 - t))[:1]]
        if not len(cand):
            return None
        i = cand[np.argmin(st.t1[cand] - st.t0[cand])]
        return {"kind": "span", "set": st.name, "i": int(i)}
    if code == CLICK_SYNC and len(data.syncs):
        sm = data.syncs
        k = int(np.argmin(np.abs(sm.t0 - t) + np.where(sm.lane == lane, 0, 1 << 62)))
        return {"kind": "sync", "k": k}
    if code == CLICK_BLOCK:
        lo, hi = view.get("range") or data.full_range(axis)
        half = int((hi - lo) * 1e9 / 1600 * 4)   # a few pixels either side of the block's centre
        return {"kind": "range", "a": t - half, "b": t + half}
    if code == CLICK_REQUESTS:
        return {"kind": "requests", "t": t}
    if code == CLICK_REQUEST_END and data.requests is not None:
        ends = data.requests.ended()
        if len(ends):   # the request whose end is nearest the mark (a binned mark: one in its bin)
            return {"kind": "request", "i": int(ends[np.argmin(np.abs(data.requests.times[ends, 3] - t))])}
    return None


def bubble_selection(data, report, rank: int) -> dict | None:
    """The ``rank``-th costliest bubble (the Panels table's row) as a selection."""
    order = bubble_order(report)
    if not 0 <= rank < len(order):
        return None
    b = order[rank]
    for st in data.sets:
        if st.source == "bubbles":
            hit = (st.index == b).nonzero()[0]
            if len(hit):
                return {"kind": "span", "set": st.name, "i": int(hit[0])}
    return None


def register(app: dash.Dash, state) -> None:
    @app.callback(Output("selection-a", "data", allow_duplicate=True),
                  Output("timeline", "figure", allow_duplicate=True), Output("view-a", "data", allow_duplicate=True),
                  Output("tabs", "value"), Output("follow-state", "data", allow_duplicate=True),
                  Output("overview", "figure", allow_duplicate=True),
                  Input("timeline", "clickData"), Input("timeline", "selectedData"), Input("overview", "clickData"),
                  Input("goto-step", "value"), Input({"type": "hit", "index": ALL}, "n_clicks"),
                  Input("row-click", "data"),
                  State("trace-a", "value"), State("view-a", "data"), State("hidden-a", "data"),
                  State("hits-a", "data"), State("follow-state", "data"), State("selection-a", "data"),
                  prevent_initial_call=True)
    def navigate(click, selected, overview_click, goto, _hits, row, path, view, hidden, hits, follow, sel):
        tid = ctx.triggered_id
        if isinstance(tid, dict) and not ctx.triggered[0]["value"]:
            raise PreventUpdate   # rows (re-)created, not clicked
        view = view or {}
        loaded, _ = state.get(path, view.get("version"))
        if loaded is None:
            raise PreventUpdate
        data, axis = loaded.timeline, view.get("axis", "window")
        current = tuple(view["range"]) if view.get("range") else None
        tab = dash.no_update
        new_range = current
        props = {t["prop_id"] for t in ctx.triggered}
        if tid == "timeline" and "timeline.clickData" not in props:   # a click may also clear a selection
            rng = ((selected or {}).get("range") or {}).get("x")
            if not rng:
                raise PreventUpdate
            o = data.origin_for(axis)
            sel = {"kind": "range", "a": int(min(rng) * 1e9 + o), "b": int(max(rng) * 1e9 + o)}
        elif tid == "timeline":
            sel = selection_from_click(data, click, view)
        elif tid == "overview":
            x = float(((overview_click or {}).get("points") or [{}])[0].get("x", 0))
            width = (current[1] - current[0]) if current else (data.full_range(axis)[1] - data.full_range(axis)[0]) / 10
            new_range, sel = (x - width / 2, x + width / 2), sel
        elif tid == "goto-step":
            r = step_range(data, int(goto)) if goto is not None else None
            if r is None:
                raise PreventUpdate
            sel = {"kind": "range", "a": r[0], "b": r[1]}
        elif isinstance(tid, dict) and tid.get("type") == "hit":
            sel = (hits or [None] * (tid["index"] + 1))[tid["index"]]
        elif tid == "row-click" and (row or {}).get("table") == "bubble-table":
            sel, tab = bubble_selection(data, loaded.report, int(row["row"])), "timeline"
        elif tid == "row-click" and (row or {}).get("table") == "fix-first-table":
            ranked = ranked_diagnoses(loaded.report)
            k = int(row["row"])
            sel = selection_for_diagnosis(loaded, ranked[k]) if k < len(ranked) else None
        else:
            raise PreventUpdate
        if sel is None and tid != "overview":
            raise PreventUpdate
        if tid not in ("timeline", "overview"):
            new_range = focus_range(loaded, sel, axis, current)
        follow_out = {**follow, "on": False} if path == LIVE and (follow or {}).get("on") else dash.no_update
        if path == LIVE:
            state.pause_live(follow)
        if new_range == current:
            return sel, marks_patch(loaded, sel, axis), dash.no_update, tab, follow_out, dash.no_update
        fig = draw(loaded, View(new_range, axis), hidden, sel, view.get("uirevision") or str(path))
        return (sel, fig, {**view, "range": list(new_range) if new_range else None, "curves": fig.layout.meta["curves"]},
                tab, follow_out, overview_patch(new_range))

    @app.callback(Output("details", "children"), Output("range-stats", "children"),
                  Input("selection-a", "data"), State("trace-a", "value"), State("view-a", "data"))
    def show_details(sel, path, view):
        if not sel:
            return [html.Div("Click a span, a bubble or a ▼ sync to see its details here.", style=SMALL)], []
        loaded, _ = state.get(path, (view or {}).get("version"))
        if loaded is None:
            raise PreventUpdate
        if sel.get("kind") == "range":
            return [], range_panel(loaded, sel)
        d = selection.details(loaded.timeline, loaded.trace, loaded.report, sel)
        if d is None:
            return [html.Div("the selection is not in this trace", style=SMALL)], []
        parts = [html.H4(d["title"], style={"margin": "10px 0 4px"}, id="details-title"),
                 fields_table(d["fields"], "details-fields")]
        if d["related"]:
            parts.append(html.Ul([html.Li(t) for t in d["related"]], id="details-related",
                                 style={"fontSize": "13px", "margin": "6px 0"}))
        if d["step"]:
            parts.append(section("The step", fields_table(d["step"], "details-step")))
        ops = section("The step's other records" if d["fields"] else "Requests",
                      html.Div(table(d["ops"], "details-ops"), style={"maxHeight": "320px", "overflowY": "auto"}))
        return parts, [ops]

    @app.callback(Output("hits-a", "data"), Output("search-hits", "children"), Output("search-summary", "children"),
                  Input("search", "value"), State("trace-a", "value"), State("view-a", "data"),
                  prevent_initial_call=True)
    def do_search(query, path, view):
        loaded, _ = state.get(path, (view or {}).get("version"))
        if loaded is None:
            raise PreventUpdate
        hits, summary = search(loaded.timeline, query or "")
        buttons = [html.Button(label, id={"type": "hit", "index": i}, n_clicks=0, className="pt-hit",
                               style={"fontSize": "12px"}) for i, (label, _) in enumerate(hits)]
        return [h[1] for h in hits], buttons, summary


def range_panel(loaded, sel: dict) -> list:
    s = range_stats(loaded.timeline, int(sel["a"]), int(sel["b"]))
    return [section(f"Selected range: {s['duration']}, device idle {s['idle']} ({100 * s['idle_share']:.1f} %)",
                    html.Div(table(s["idle_rows"], "range-idle", "no device idle in this range")),
                    html.Div(table(s["rows"], "range-table", "nothing runs in this range"),
                             style={"maxHeight": "380px", "overflowY": "auto", "marginTop": "8px"}),
                    help_text="Every category and lane in the range: spans that overlap it, the time they "
                              "spend inside it, and the distribution of their durations; above, the device "
                              "idle inside it by cause.")]
