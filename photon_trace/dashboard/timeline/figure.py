"""The timeline figure: host-thread and device-stream lanes, the requests lane, bubbles and
flagged syncs.

Two pure steps, so a zoom re-draw never touches the trace again:

* ``prepare_timeline(trace, report)`` (``data.py``) turns records into numpy
  arrays, one ``SpanSet`` per category, sorted once;
* ``timeline_figure(data, view)`` draws the visible range (``draw.py``: each
  category one WebGL trace; spans under a pixel summed into pixel columns, never widened).

The x axis is linear, in seconds with adaptive units (ns, µs, ms, s) from the analysis
window's start, or from the trace's first record (the Perfetto export's ts = 0), or
labelled by step; two traces compare on aligned axes.
"""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from photon_trace.dashboard.timeline.data import TimelineData
from photon_trace.dashboard.timeline.draw import draw
from photon_trace.dashboard.timeline.draw_marks import REQUEST_END_NAMES, REQUEST_NAMES
from photon_trace.dashboard.timeline.marks import SYNC_NAME, SYNC_OUTSIDE_NAME
from photon_trace.dashboard.timeline.text import plain
from photon_trace.dashboard.timeline.view import View

AXIS_TITLES = {"window": "time from the analysis window's start",
               "trace": "time from the trace's first record (the Perfetto export's ts)",
               "step": "step (ticks where a step's launch begins)"}
LANE_PX = 70          # the height of one lane, up to FULL_LANES lanes; more share FULL_LANES' height
FULL_LANES = 8
MIN_LANE_PX = 24      # a call stack's rows: one line of label each
AXIS_ABOVE_PX = 48    # the time axis' ticks and title, above the lanes
LEGEND_PX = 56        # room for two rows of legend above the axis
WINDOW_NOTE = ("shaded: outside the analysis window (warm-up or drain). Drawn and marked like the rest, "
               "but not counted in the cards, tables and diagnosis")


def lane_axis(data: TimelineData) -> dict:
    """y-axis settings: one labelled lane per host thread and device stream, top to bottom."""
    n = len(data.lanes)
    # a call stack's deeper rows say only their depth: their thread is named on the row above
    return dict(tickvals=[-i for i in range(n)],
                ticktext=[f"depth {ln.depth}" if ln.depth else plain(ln.label) for ln in data.lanes],
                range=[-(n - 1) - 0.6, 0.72], fixedrange=True, showgrid=False, zeroline=False)


def lane_px(n: int) -> int:
    """The height of a lane when there are ``n``."""
    return LANE_PX if n <= FULL_LANES else max(MIN_LANE_PX, LANE_PX * FULL_LANES // n)


def x_axis(data: TimelineData, view: View, meta: dict) -> dict:
    """Adaptive units on time axes (plotly's SI format: 500µs, 12.5ms, 2s); step ticks on the step axis."""
    lo, hi = meta["x_range"]
    ax = dict(title=AXIS_TITLES[view.axis], showgrid=True, zeroline=False, range=[lo, hi],
              autorange=False if view.x_range else True)
    if view.axis != "step":
        return {**ax, "tickformat": "~s", "ticksuffix": "s", "exponentformat": "SI"}
    origin = data.origin_for(view.axis)
    a, b = lo * 1e9 + origin, hi * 1e9 + origin
    k0, k1 = np.searchsorted(data.step_t0, [a, b])
    in_view = k1 - k0
    # ticks over all that was drawn (the page pans across it on its own), as dense as fits the view
    d0, d1 = meta.get("data_range") or (lo, hi)
    k0, k1 = np.searchsorted(data.step_t0, [d0 * 1e9 + origin, d1 * 1e9 + origin])
    idx = np.arange(k0, k1)
    if in_view > 12:
        every = int(np.ceil(in_view / 12))
        idx = idx[data.step_ids[idx] % every == 0] if every > 1 else idx
    return {**ax, "tickmode": "array", "tickvals": list(data.to_x(data.step_t0[idx], view.axis)),
            "ticktext": [f"{int(s)}" for s in data.step_ids[idx]]}


def window_shapes(data: TimelineData, view: View = View(), xref: str = "x",
                  yref: str = "y domain") -> tuple[list[dict], list[dict]]:
    """Grey out what lies outside the analysis window (warm-up and drain), with a label saying so."""
    if not data.window:
        return [], []
    lo, hi = data.full_range(view.axis)
    w0, w1 = float(data.to_x(data.window[0], view.axis)), float(data.to_x(data.window[1], view.axis))
    shade = dict(type="rect", xref=xref, yref=yref, y0=0, y1=1, fillcolor="rgba(0,0,0,0.06)",
                 line=dict(width=0), layer="below")
    label = dict(xref=xref, yref=yref, y=1, yanchor="top", showarrow=False, hovertext=WINDOW_NOTE,
                 font=dict(size=10, color="#777"), bgcolor="rgba(255,255,255,0.6)")
    shapes, notes = [], []
    for x0, x1, what in ((lo, w0, "warm-up"), (w1, hi, "drain")):
        if x1 > x0:
            shapes.append({**shade, "x0": x0, "x1": x1})
            notes.append({**label, "x": x0 if what == "warm-up" else x1,
                          "xanchor": "left" if what == "warm-up" else "right",
                          "text": f"{what}: outside the analysis window, not counted"})
    return shapes, notes


def timeline_figure(data: TimelineData, view: View = View(), title: str | None = None,
                    marks: dict | None = None) -> go.Figure:
    """The whole timeline figure for ``view``; ``layout.meta`` says what was drawn; ``marks``
    (shapes, annotations) draws a selection over it."""
    traces, meta = draw(data, view)
    n = len(data.lanes)
    shapes, notes = window_shapes(data, view)
    fig = go.Figure(data=traces)
    # The time axis is on top, as in Perfetto and Nsight, so it is on screen however many lanes
    # there are; the legend sits above it, a fixed number of pixels up (legend y is in paper units).
    top = AXIS_ABOVE_PX + LEGEND_PX + (26 if title else 0)
    height = top + lane_px(n) * n + 30
    fig.update_layout(
        template="plotly_white", title=dict(text=title, x=0.01) if title else None,
        height=height, margin=dict(l=120, r=20, t=top, b=30),
        hovermode="closest", hoverdistance=30, dragmode="zoom", selectdirection="h", meta=meta,
        legend=dict(orientation="h", yanchor="bottom", y=1 + AXIS_ABOVE_PX / (height - top - 30), x=0,
                    font=dict(size=11)),
        xaxis={**x_axis(data, view, meta), "side": "top"}, yaxis=lane_axis(data),
        shapes=shapes + list((marks or {}).get("shapes", [])),
        annotations=notes + list((marks or {}).get("annotations", [])),
        uirevision="timeline",
    )
    return fig


def compare_figure(a: TimelineData, b: TimelineData, view: View = View(),
                   labels: tuple[str, str] = ("A", "B")) -> go.Figure:
    """Two timelines one above the other on one shared x axis, each relative to its own
    window start, so zooming one zooms both and equal x means equal time into the run."""
    ra, rb = a.full_range(view.axis), b.full_range(view.axis)
    full = (min(ra[0], rb[0]), max(ra[1], rb[1]))
    v = view.with_range(view.x_range or full)
    na, nb = len(a.lanes), len(b.lanes)
    gap = 0.16
    h = (1 - gap) / (na + nb)
    dom_b = [0.0, h * nb]
    dom_a = [h * nb + gap, 1.0]
    ta, meta_a = draw(a, v, "x", "y")
    shown = {t.legendgroup or html.unescape(t.name) for t in ta if t.showlegend}   # as the sets name them
    names_b = {st.name for st in b.sets} | {SYNC_NAME, SYNC_OUTSIDE_NAME,
                                            *REQUEST_NAMES.values(), *REQUEST_END_NAMES.values()}
    tb, meta_b = draw(b, v, "x", "y2", show_legend=names_b - shown)
    shapes_a, notes_a = window_shapes(a, view, "x", "y domain")
    shapes_b, notes_b = window_shapes(b, view, "x", "y2 domain")
    fig = go.Figure(data=ta + tb)
    ax = x_axis(a, v.with_range(view.x_range), meta_a)
    # on top, over A's lanes, as on the timeline: on screen however many lanes the two have
    ax.update(title="time from each trace's analysis window start", anchor="y", side="top")
    fig.update_layout(
        template="plotly_white", height=220 + AXIS_ABOVE_PX + lane_px(na + nb) * (na + nb),
        margin=dict(l=120, r=20, t=34 + AXIS_ABOVE_PX, b=90),
        hovermode="closest", hoverdistance=30, dragmode="zoom", uirevision="compare",
        meta={"a": meta_a, "b": meta_b, "labels": list(labels)},
        # the legend goes under the lanes, so each trace's label has the space above its lanes
        legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, font=dict(size=11)),
        xaxis=ax, yaxis={**lane_axis(a), "domain": dom_a}, yaxis2={**lane_axis(b), "domain": dom_b},
        shapes=shapes_a + shapes_b, annotations=notes_a + notes_b + [
            # each trace's name sits in the gap just above its own lanes, clear of the legend
            dict(text=f"<b>{plain(labels[0])}</b>", xref="paper", yref="paper", x=0, y=dom_a[1], xanchor="left",
                 yanchor="bottom", showarrow=False, yshift=AXIS_ABOVE_PX + 2, font=dict(size=12), name="label-a"),
            dict(text=f"<b>{plain(labels[1])}</b>", xref="paper", yref="paper", x=0, y=dom_b[1], xanchor="left",
                 yanchor="bottom", showarrow=False, yshift=4, font=dict(size=12), name="label-b")],
    )
    return fig


def placeholder_figure(message: str, height: int = 260) -> go.Figure:
    """An empty figure carrying a message (no trace loaded, or it failed)."""
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=height, xaxis=dict(visible=False),
                      yaxis=dict(visible=False), margin=dict(l=20, r=20, t=20, b=20),
                      annotations=[dict(text=plain(message), showarrow=False, x=0.5, y=0.5, xref="paper",
                                        yref="paper", font=dict(size=14, color="#666"))])
    return fig


__all__ = ["timeline_figure", "compare_figure", "placeholder_figure", "lane_axis", "window_shapes"]
