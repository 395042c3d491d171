"""The overview strip above the timeline: the whole trace at a glance, and where the view is.

Per pixel column of the whole trace, the compute lane's busy share and its idle by bubble
cause, stacked (honest shares, as the timeline draws them); a rectangle marks the part the
timeline shows, so a user zoomed into one step still sees where it lies. Clicking the
strip centres the view there.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from photon_trace.dashboard.timeline.data import TimelineData

COLUMNS = 600


def overview_figure(data: TimelineData, axis: str = "window", view_range: tuple[float, float] | None = None) -> go.Figure:
    lo, hi = data.full_range(axis)
    edges = np.linspace(data.t_min, data.t_max, COLUMNS + 1)
    width = edges[1] - edges[0]
    x = data.to_x(edges, axis)
    xs = np.repeat(x, 2)[1:-1]
    below = np.zeros(COLUMNS)
    traces = []
    layers = [("busy", "rgba(47,109,181,0.55)",
               [st for st in data.sets if st.group == "device"])]
    layers += [(st.name, st.colour, [st]) for st in data.sets if st.group == "bubble"]
    for name, colour, sets in layers:
        occ = np.zeros(COLUMNS)
        for st in sets:
            k = np.flatnonzero(st.by_lane.lanes == data.compute_lane)
            if len(k):
                occ += st.by_lane.busy(int(k[0]), edges) / width
        occ = np.clip(occ, 0, 1)
        top = np.minimum(below + occ, 1.0)
        if np.any(top > below):
            traces.append(go.Scatter(x=np.concatenate([xs, xs[::-1]]),
                                     y=np.concatenate([np.repeat(top, 2), np.repeat(below, 2)[::-1]]),
                                     fill="toself", mode="lines", line=dict(width=0), fillcolor=colour,
                                     name=name, hoverinfo="skip", showlegend=False))
        below = top
    sm = data.syncs
    if len(sm):   # one tick per column that holds a sync (a long trace has tens of thousands)
        cols = np.unique(np.clip(np.searchsorted(edges, sm.t0, side="right") - 1, 0, COLUMNS - 1))
        traces.append(go.Scatter(x=(x[cols] + x[cols + 1]) / 2, y=np.full(len(cols), 1.12), mode="markers",
                                 marker=dict(symbol="triangle-down", size=5, color="#B00020"),
                                 hoverinfo="skip", showlegend=False, name="syncs"))
    # a transparent layer that takes the clicks (a filled area is not clickable)
    mid = (x[:-1] + x[1:]) / 2
    traces.append(go.Scatter(x=mid, y=np.full(COLUMNS, 0.5), mode="markers", marker=dict(size=14, opacity=0),
                             hovertemplate="click: centre the view here<extra></extra>", showlegend=False,
                             name="overview (click)"))
    fig = go.Figure(traces)
    fig.update_layout(template="plotly_white", height=70, margin=dict(l=120, r=20, t=4, b=16),
                      xaxis=dict(range=[lo, hi], fixedrange=True, tickformat="~s", ticksuffix="s",
                                 tickfont=dict(size=9)),
                      yaxis=dict(range=[0, 1.25], fixedrange=True, visible=False), hovermode="closest",
                      shapes=view_box(view_range),
                      # the box's look, for the page to move it on its own (assets/timeline_view.js)
                      meta={"overview": True, "range": [lo, hi], "view_box": view_box((lo, hi))[0]})
    return fig


def view_box(view_range: tuple[float, float] | None) -> list[dict]:
    """The rectangle showing what the timeline shows (none when it shows everything)."""
    if not view_range:
        return []
    return [dict(type="rect", xref="x", yref="paper", x0=view_range[0], x1=view_range[1], y0=0, y1=1,
                 line=dict(color="#111", width=1.5), fillcolor="rgba(255,213,79,0.25)", name="view")]
