"""Callbacks of live mode: the freshness line, re-drawing when new data arrives while
following, and the follow button.

Every half second the page asks the follower how fresh its data is (a cheap call: no
figure): "live", "idle" (reachable, nothing new) or "unreachable", each with the time of
the last data; the cards grey out when stale. While following, a new version re-draws the
timeline; zooming or selecting pauses following (the view stays put) until "follow".
"""
from __future__ import annotations

import dash
from dash import Input, Output, State
from dash.exceptions import PreventUpdate

LIVE = "live"


def register(app: dash.Dash, state) -> None:
    follower = state.follower

    @app.callback(Output("live-status", "children"), Output("live-status", "style"),
                  Output("summary", "className"), Output("live-version", "data"), Output("follow", "style"),
                  Input("live-tick", "n_intervals"), State("live-version", "data"), State("follow-state", "data"),
                  State("trace-a", "value"))
    def tick(_n, seen, follow, path):
        if follower is None:
            raise PreventUpdate
        st = follower.status()
        following = bool((follow or {}).get("on"))
        watching = path == LIVE
        text = st.text if following or not watching else st.paused()
        style = {"color": st.colour, "fontSize": "13px", "fontWeight": 600 if st.stale else 400}
        fresh = watching and following and follower.version != (seen or {}).get("v")
        version = {"v": follower.version, "e": (follow or {}).get("epoch", 0)} if fresh else dash.no_update
        button = {"display": "inline-block" if watching and not following else "none"}
        return text, style, ("pt-stale" if st.stale and watching else ""), version, button

    @app.callback(Output("follow-state", "data", allow_duplicate=True),
                  Output("live-version", "data", allow_duplicate=True),
                  Input("follow", "n_clicks"), State("follow-state", "data"), State("zoom-a", "data"),
                  prevent_initial_call=True)
    def resume(n, follow, zoom):
        if not n or follower is None:
            raise PreventUpdate
        # a new epoch: the re-draw gets a new uirevision, so the user's old zoom is let go (and
        # zooms up to now no longer hold updates back: ``since`` is the last zoom's page time)
        epoch = (follow or {}).get("epoch", 0) + 1
        return ({**(follow or {}), "on": True, "epoch": epoch, "since": (zoom or {}).get("nonce", 0)},
                {"v": follower.version, "e": epoch})
