"""Callbacks of trace A's timeline: opening a path, drawing, zooming, legend state, the
"what to fix first" box and the overview strip.

Legend clicks are remembered in the page (``hidden-a``) and every re-draw honours them,
so a zoom never brings back a category the user hid.
"""
from __future__ import annotations

import time
from dataclasses import replace

import dash
from dash import ClientsideFunction, Input, Output, Patch, State, ctx
from dash.exceptions import PreventUpdate

from photon_trace.dashboard.layout import error_box, section, summary_cards, table
from photon_trace.dashboard.panels import figures, selection
from photon_trace.dashboard.sources.store import Loaded, LoadError, PathRefused
from photon_trace.dashboard.timeline.figure import placeholder_figure, timeline_figure, window_shapes
from photon_trace.dashboard.timeline.overview import overview_figure, view_box
from photon_trace.dashboard.timeline.view import View, x_range_from_relayout
from photon_trace.telemetry.analysis.causes import Cause

LIVE = "live"
PAD = 1.0            # drawn beyond each side of the view, as a share of its width (View.pad)
SPANS_WAIT_S = 5.0   # how long the first draw waits for a loading trace's spans before the page polls
# The browser's side of five callbacks (assets/clientside.js): the x-axis part of a compare
# zoom; trace A's zoom and pan, answered in the page unless the view needs new data; a live
# re-draw applied only if the user has not zoomed since it was asked for; a zoom's drawing
# shown at the view the user chose last; the legend groups the user hid.
ZOOM_FILTER = ClientsideFunction("timeline", "zoom_filter")
ZOOM_VIEW = ClientsideFunction("timeline", "zoom_view")
APPLY_LIVE = ClientsideFunction("timeline", "apply_live")
APPLY_ZOOM = ClientsideFunction("timeline", "apply_zoom")
HIDDEN_FILTER = ClientsideFunction("timeline", "hidden_filter")


def draw(loaded: Loaded, view: View, hidden: list | None, sel: dict | None, uirevision: str):
    """Trace A's figure for ``view``, with the selection's marks and the hidden legend groups;
    drawn ``PAD`` of the view's width beyond each side, so the page pans that far by itself."""
    view = replace(view, pad=PAD)
    fig = timeline_figure(loaded.timeline, view, marks=selection.marks(loaded.timeline, loaded.trace, sel, view.axis))
    hide = set(hidden or ())
    if hide:
        for t in fig.data:
            if (t.legendgroup or t.name) in hide:
                t.visible = "legendonly"
    fig.update_layout(uirevision=uirevision)
    return fig


def marks_patch(loaded: Loaded, sel: dict | None, axis: str) -> Patch:
    """Only the layout's shapes and annotations: a selection re-drawn without re-sending the data."""
    shapes, notes = window_shapes(loaded.timeline, View(axis=axis))
    m = selection.marks(loaded.timeline, loaded.trace, sel, axis)
    p = Patch()
    p["layout"]["shapes"] = shapes + m["shapes"]
    p["layout"]["annotations"] = notes + m["annotations"]
    return p


def overview_patch(rng) -> Patch:
    p = Patch()
    p["layout"]["shapes"] = view_box(tuple(rng) if rng else None)
    return p


def fix_first(loaded: Loaded, highlight: int | None = None) -> list:
    """The ranked diagnosis on the first screen: what host code can fix, first; device-side after."""
    rows = figures.diagnosis_rows(loaded.report)[:5]
    if not rows:
        return []
    return [section("What to fix first (click a row to see it on the timeline)",
                    table(rows, "fix-first-table", clickable=True, highlight=highlight),
                    help_text="The diagnosis, ranked: what host code can fix first, by the idle it costs; then "
                              "the host not running (blocked by another thread, descheduled by the machine) and "
                              "the device's own launch latency, none of them fixable in the phase's code.")]


def register(app: dash.Dash, state) -> None:
    @app.callback(Output("trace-a", "options"), Output("trace-a", "value"),
                  Output("trace-b", "options"), Output("trace-b", "value"), Output("path-error", "children"),
                  Input("open-a", "n_clicks"), Input("open-b", "n_clicks"), Input("path-input", "n_submit"),
                  State("path-input", "value"), State("trace-a", "value"), State("trace-b", "value"),
                  prevent_initial_call=True)
    def open_path(_a, _b, _enter, text, a, b):
        """Open a typed path as A (button or Enter) or B, if it lies in an allowed folder and loads;
        a refused or bad file leaves the current view as it was and says why."""
        skip = (dash.no_update,) * 4
        text = (text or "").strip()
        if not text:
            return (*skip, error_box("enter a path to a trace file (the box is empty)"))
        try:
            p = str(state.store.check(text))
            state.store.get(p)
        except (PathRefused, LoadError) as e:
            return (*skip, error_box(str(e)))
        opts = state.options([p])
        if ctx.triggered_id == "open-b":
            return opts, a, opts, p, []
        return opts, p, opts, b, []

    @app.callback(Output("summary", "children"), Output("timeline", "figure"), Output("load-error", "children"),
                  Output("view-a", "data"), Output("selection-a", "data"), Output("fix-first", "children"),
                  Output("overview", "figure"), Output("pending-tick", "disabled"), Output("live-draw", "data"),
                  Input("trace-a", "value"), Input("live-version", "data"), Input("axis-mode", "value"),
                  Input("load-state", "data"),
                  State("hidden-a", "data"), State("follow-state", "data"), State("view-a", "data"),
                  State("zoom-a", "data"))
    def render_a(path, live_version, axis, load_state, hidden, follow, view, zoom):
        """Trace A drawn: as soon as its spans are loaded (the analysis may still be running;
        ``poll_load`` says when it is done and this re-draws once, keeping the user's zoom),
        and again on new live data (through ``live-draw``: the page applies it unless the user
        zoomed meanwhile, ``APPLY_LIVE``)."""
        trigger = ctx.triggered_id
        asked = time.monotonic()
        live = path == LIVE and state.follower is not None
        if trigger == "live-version" and not live:
            raise PreventUpdate
        if trigger == "live-version" and x_range_from_relayout(zoom)[0] == "range" and \
                (zoom or {}).get("nonce", 0) > (follow or {}).get("since", 0):
            # the user zoomed since following (re)started; this update was sent before the pause
            # reached the server: keep their view
            raise PreventUpdate
        if trigger == "load-state" and (live or (load_state or [None])[0] != path):
            raise PreventUpdate
        view = view or {}
        axis = axis or "window"
        version = (live_version or {}).get("v")
        if live:
            loaded, err = state.get(path, version)
        else:   # the page shows "loading…" meanwhile; spans ready within the wait are sent at once
            loaded, err = state.peek(path, SPANS_WAIT_S if trigger != "load-state" else 0.0)
        if loaded is None:
            waiting = err is None and not live
            msg = f"loading {state.store.shown(path)}…" if waiting else (err or "no trace")
            # live says why it has nothing to draw in its status line and the placeholder, not in
            # the error box: a new run's "no spans yet" there outlived the wait whenever the
            # next live draw was dropped as stale (seen after a server restart)
            return ([], placeholder_figure(msg), error_box(None if waiting or live else err), dash.no_update, None, [],
                    placeholder_figure("", 60), not waiting, dash.no_update)
        sel, rng, highlight = None, None, None
        if trigger == "load-state" and tuple(view.get("drawn") or (None, None))[1] == path:
            rng = tuple(view["range"]) if view.get("range") else None   # keep what the user zoomed to
        guided = bool(view.get("guided"))
        if state.guide and loaded.complete and not guided and not live and state.initial and path == state.initial[0]:
            sel, rng = guided_view(loaded, axis)
            highlight, guided = 0, True
        uirev = f"live:{(follow or {}).get('epoch', 0)}" if live else f"{path}:{axis}"
        fig = draw(loaded, View(rng, axis), hidden, sel, uirev)
        if trigger == "live-version" and state.live_redraw_is_stale(follow, zoom, asked):
            # the user zoomed or selected while this was asked for or drawn: its response
            # would land after the view they chose (a loaded server may take the requests
            # out of order)
            raise PreventUpdate
        notes = loaded.notes if not live else []
        drawn = ("complete" if loaded.complete else "partial", path)
        view_out = {"range": list(rng) if rng else None, "axis": axis, "uirevision": uirev,
                    "curves": fig.layout.meta["curves"], "drawn": drawn,
                    "version": (version if version is not None else state.follower.version) if live else None,
                    "guided": guided}
        overview = overview_figure(loaded.timeline, axis, rng)
        fixes = fix_first(loaded, highlight) if loaded.complete else []
        cards = summary_cards(loaded.report, ranks=loaded.ranks)
        if trigger == "live-version":
            skip = dash.no_update
            gated = {"asked": (zoom or {}).get("nonce", 0), "epoch": (follow or {}).get("epoch", 0),
                     "fig": fig.to_plotly_json(), "view": view_out, "sel": sel,
                     "overview": overview.to_plotly_json()}
            return (cards, skip, error_box(err, notes), skip, skip, fixes, skip, loaded.complete, gated)
        return (cards, fig, error_box(err, notes), view_out, sel, fixes, overview, loaded.complete, dash.no_update)

    @app.callback(Output("load-state", "data"), Output("pending-tick", "disabled", allow_duplicate=True),
                  Input("pending-tick", "n_intervals"), State("trace-a", "value"), State("load-state", "data"),
                  State("view-a", "data"), prevent_initial_call=True)
    def poll_load(_n, path, seen, view):
        """While trace A loads: a cheap check of how far it got; it changes (and so re-draws the
        timeline) only when the spans, then the analysis, become ready.

        A poll from a page that holds the spans-only view means the page has drawn it (the
        interval fires only when the page's thread is free again): the analysis may start.
        Started earlier, it took the CPU and the GIL from sending and drawing those spans."""
        if list((view or {}).get("drawn") or ()) == ["partial", path]:
            state.store.drawn(path)
        loaded, err = state.peek(path)
        now = [path, "error" if err else "none" if loaded is None else
               "complete" if loaded.complete else "partial"]
        if now == seen:
            raise PreventUpdate
        return now, now[1] in ("complete", "error")

    app.clientside_callback(ZOOM_VIEW, Output("zoom-a", "data"), Output("view-a", "data", allow_duplicate=True),
                            Input("timeline", "relayoutData"), State("trace-a", "value"), State("view-a", "data"),
                            prevent_initial_call=True)
    app.clientside_callback(APPLY_LIVE, Output("timeline", "figure", allow_duplicate=True),
                            Output("view-a", "data", allow_duplicate=True),
                            Output("selection-a", "data", allow_duplicate=True),
                            Output("overview", "figure", allow_duplicate=True),
                            Input("live-draw", "data"), State("zoom-a", "data"), State("follow-state", "data"),
                            prevent_initial_call=True)
    app.clientside_callback(HIDDEN_FILTER, Output("hidden-a", "data"), Input("timeline", "restyleData"),
                            State("timeline", "figure"), State("hidden-a", "data"), prevent_initial_call=True)

    app.clientside_callback(APPLY_ZOOM, Output("timeline", "figure", allow_duplicate=True),
                            Output("view-a", "data", allow_duplicate=True),
                            Input("zoom-draw", "data"), prevent_initial_call=True)

    @app.callback(Output("zoom-draw", "data"), Output("follow-state", "data", allow_duplicate=True),
                  Input("zoom-a", "data"), State("trace-a", "value"), State("view-a", "data"),
                  State("hidden-a", "data"), State("selection-a", "data"), State("follow-state", "data"),
                  prevent_initial_call=True)
    def zoom_a(relayout, path, view, hidden, sel, follow):
        kind, rng = x_range_from_relayout(relayout)
        if kind is None:
            raise PreventUpdate
        if path == LIVE and kind == "range":
            state.pause_live(follow, (relayout or {}).get("nonce", 0))
        view = view or {}
        loaded, _ = state.get(path, view.get("version"))
        if loaded is None:
            raise PreventUpdate
        axis = view.get("axis", "window")
        fig = draw(loaded, View(rng if kind == "range" else None, axis), hidden, sel,
                   view.get("uirevision") or str(path))
        follow_out = dash.no_update
        if path == LIVE and kind == "range" and (follow or {}).get("on"):
            follow_out = {**follow, "on": False}   # the user looks at something: stop moving it away
        # the page shows it at the view the user chose last (APPLY_ZOOM), which may be a later one
        out = {"asked": (relayout or {}).get("seq", 0), "fig": fig.to_plotly_json(),
               "view": {**view, "range": list(rng) if rng else None, "curves": fig.layout.meta["curves"]}}
        return out, follow_out


def guided_view(loaded: Loaded, axis: str) -> tuple[dict | None, tuple[float, float] | None]:
    """The first thing to fix: the top host-fixable diagnosis row's first occurrence in the
    window (a sync marker at its call site, or its costliest bubble), selected, with a few
    steps around it in view."""
    ranked = figures.ranked_diagnoses(loaded.report)
    if not ranked:
        return None, None
    sel = selection_for_diagnosis(loaded, ranked[0])
    return sel, (focus_range(loaded, sel, axis) if sel else None)


def selection_for_diagnosis(loaded: Loaded, d) -> dict | None:
    data = loaded.timeline
    if d.cause == Cause.ACCIDENTAL_SYNC:
        sm = data.syncs
        ks = [k for k in range(len(sm)) if sm.site[k] == d.site_or_phase and sm.in_window[k] and len(sm.bubbles_of(k))]
        if ks:
            return {"kind": "sync", "k": int(ks[0])}
    best = None
    for st in data.sets:
        if st.group != "bubble":
            continue
        for i in range(len(st)):
            b = data.bubbles[int(st.index[i])]
            if b.cause == d.cause and b.detail == d.site_or_phase and st.in_window[i] and \
                    (best is None or b.t1 - b.t0 > best[2]):
                best = (st.name, i, b.t1 - b.t0)
    return {"kind": "span", "set": best[0], "i": int(best[1])} if best else None


def focus_range(loaded: Loaded, sel: dict, axis: str, current: tuple[float, float] | None = None):
    """A view range that shows ``sel`` with about two steps either side (or keeps ``current``
    when it already shows it)."""
    r = selection.target_ns(loaded.timeline, sel)
    if r is None:
        return current
    data = loaded.timeline
    a, b = data.to_x(r[0], axis), data.to_x(r[1], axis)
    if current and current[0] <= a and b <= current[1]:
        return current
    period = (loaded.report.mean_period_ms or 1.0) * 1e-3
    pad = max(2.5 * period, (b - a) * 2)
    return (float(a - pad), float(b + pad))


