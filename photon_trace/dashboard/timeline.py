"""The timeline figure: host-thread and device-stream lanes, bubbles and flagged syncs.

Two pure steps, so a zoom re-draw never touches the trace again (the first lives in
``timeline_data.py``):

* ``prepare_timeline(trace, report)`` turns records into numpy arrays, one
  ``SpanSet`` per category (a host phase, a device op, a wait kind, a bubble
  cause), sorted once.
* ``timeline_traces(data, view)`` draws the visible range. Each category is
  one WebGL ``scattergl`` trace of filled rectangles separated by NaN gaps
  (one trace per category, never one shape per span). When the range holds more
  than ``max_spans`` spans the level of detail drops: spans are binned into
  buckets of a few pixels and each bucket is drawn with a height equal to the
  fraction of it the category occupies (stacked per lane; equal neighbours
  merge), bubbles become a rug above the compute lane and sync markers are
  binned too, so a 100 s trace reads as a utilisation strip; zooming in
  re-draws only the visible range, exactly once it holds few enough spans.

The x axis is linear: milliseconds from the analysis window's start (the whole
trace's start when there is no window), so two traces compare on aligned axes.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from photon_trace.dashboard.timeline_data import (  # noqa: F401  (re-exported: the app and tests use them)
    BUBBLE_CAUSES, COLOURS, NS_PER_MS, Lane, SpanSet, SyncMarkers, TimelineData, prepare_timeline,
)
from photon_trace.dashboard.view import View, x_range_from_relayout  # noqa: F401  (re-exported)

SYNC_MARKER_COLOUR = "#B00020"
STEP_LINE_COLOUR = "rgba(60,60,60,0.18)"

# Vertical bands inside a lane (lane centre at y = -index).
HALF = 0.36
BANDS = {
    "phase": (-HALF, HALF),
    "device": (-HALF, HALF),
    "bubble": (-HALF - 0.08, HALF + 0.08),  # sticks out of the lane so a thin bubble still shows
    "subphase": (-HALF, -0.02),   # nested inside launch/finalize: lower half, drawn on top
    "wait": (0.04, HALF),         # nested inside a phase: upper half, drawn on top
    "bubble_rug": (HALF + 0.02, HALF + 0.16),  # aggregated bubbles: a strip above the compute lane
}
RUG_FULL_IDLE = 0.1               # a bucket this idle (or more) fills the rug strip
SYNC_MARKER_DY = HALF + 0.1       # markers sit just above the host lane they happened on
STACKED_GROUPS = ("phase", "device")  # share a lane's height when aggregated

HEIGHT_STEPS = 64                 # aggregated heights are quantised to 1/64 of a lane's band

def _rects(x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed rectangles separated by NaN gaps: six points each (four corners, close, gap)."""
    n = len(x0)
    nan = np.full(n, np.nan)
    x = np.column_stack([x0, x1, x1, x0, x0, nan]).ravel()
    y = np.column_stack([y0, y0, y1, y1, y0, nan]).ravel()
    return x[:-1], y[:-1]  # no trailing gap


def _lane_y(lanes: np.ndarray, group: str) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = BANDS[group]
    c = -lanes.astype(np.float64)
    return c + lo, c + hi


_HOVER = {
    "phase": "<b>%{meta}</b> · step %{customdata[0]} · slot %{customdata[1]} · rows %{customdata[2]}"
             "<br>duration %{customdata[3]:,.1f} µs · start %{customdata[5]:.3f} ms<extra></extra>",
    "subphase": "<b>%{meta}</b> · step %{customdata[0]} · slot %{customdata[1]} · rows %{customdata[2]}"
                "<br>duration %{customdata[3]:,.1f} µs<extra></extra>",
    "device": "<b>%{meta}</b> · step %{customdata[0]} · slot %{customdata[1]} · rows %{customdata[2]}"
              "<br>duration %{customdata[3]:,.1f} µs · start %{customdata[5]:.3f} ms"
              "<br>started %{customdata[4]:,.1f} µs after it was enqueued<extra></extra>",
    "wait": "<b>%{meta}</b> · step %{customdata[0]}<br>%{text}"
            "<br>waited %{customdata[3]:,.1f} µs<extra></extra>",
    "bubble": "<b>%{meta}</b> · step %{customdata[0]}<br>device idle %{customdata[3]:,.1f} µs"
              "<br>%{text}<extra></extra>",
    "aggregate": "<b>%{text}</b> (aggregated)<br>%{customdata[0]:,} spans · steps %{customdata[3]}–%{customdata[4]}"
                 "<br>busy %{customdata[1]:,.1f} µs = %{customdata[2]:.0f}% of this block<extra></extra>",
    "sync": "<b>accidental sync</b> · step %{customdata[0]}<br>site: %{text}"
            "<br>host waited %{customdata[1]:,.1f} µs · device idle caused %{customdata[2]:,.1f} µs"
            "<extra></extra>",
    "sync_aggregate": "<b>%{customdata[0]:,} accidental syncs</b> here<br>e.g. %{text}"
                      "<br>host waited %{customdata[1]:,.1f} µs · device idle caused %{customdata[2]:,.1f} µs"
                      "<extra></extra>",
}


def _hover(st: SpanSet) -> str:
    """The group's hover; spans that carry their own name (an imported trace's ops) show it too."""
    if st.text is None or st.group in ("wait", "bubble"):
        return _HOVER[st.group]
    return _HOVER[st.group].replace("<extra>", "<br>%{text}<extra>", 1)


def _visible(st: SpanSet | SyncMarkers, a: int, b: int) -> np.ndarray:
    return np.flatnonzero((st.t0 <= b) & (st.t1 >= a))


def _busy_before(t0s: np.ndarray, t1s: np.ndarray, cum0: np.ndarray, cum1: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Busy ns before each ``x``: sum over spans of clip(x - t0, 0, t1 - t0), exact even for overlaps."""
    k0 = np.searchsorted(t0s, x, side="right")
    k1 = np.searchsorted(t1s, x, side="right")
    return (k0 * x - cum0[k0]) - (k1 * x - cum1[k1])


def _bucket_occupancy(t0: np.ndarray, t1: np.ndarray, edges: np.ndarray) -> np.ndarray:
    t0s, t1s = np.sort(t0).astype(np.float64), np.sort(t1).astype(np.float64)
    cum0 = np.concatenate([[0.0], np.cumsum(t0s)])
    cum1 = np.concatenate([[0.0], np.cumsum(t1s)])
    return np.diff(_busy_before(t0s, t1s, cum0, cum1, edges))


def timeline_traces(data: TimelineData, view: View = View(), xaxis: str = "x", yaxis: str = "y",
                    name_prefix: str = "", show_legend: bool | set[str] = True) -> tuple[list[go.Scattergl], dict]:
    """The traces for ``view`` and a ``meta`` dict (mode, counts drawn) for tests and the page."""
    lo_ms, hi_ms = view.x_range if view.x_range else data.full_range_ms()
    if hi_ms <= lo_ms:
        hi_ms = lo_ms + 1e-3
    a = int(np.floor(lo_ms * NS_PER_MS + data.origin))
    b = int(np.ceil(hi_ms * NS_PER_MS + data.origin))
    vis = {st.name: _visible(st, a, b) for st in data.sets}
    n_visible = sum(len(v) for st, v in zip(data.sets, vis.values()) if st.group != "bubble")
    aggregate = n_visible > view.max_spans
    traces: list[go.Scattergl] = []
    meta: dict[str, Any] = {"mode": "aggregate" if aggregate else "exact", "spans_visible": n_visible,
                            "spans_total": data.n_spans, "x_range": [lo_ms, hi_ms], "bubbles": 0,
                            "syncs": 0, "lanes": [ln.label for ln in data.lanes]}
    common = dict(xaxis=xaxis, yaxis=yaxis)
    if aggregate:
        traces += _aggregate_traces(data, vis, a, b, view, common, name_prefix, show_legend, meta)
    else:
        traces += _exact_traces(data, vis, view, common, name_prefix, show_legend, meta)
        traces += _step_lines(data, a, b, view, common, name_prefix)
    traces += _sync_traces(data, a, b, view, aggregate, common, name_prefix, show_legend, meta)
    return traces, meta


def _exact_traces(data, vis, view, common, prefix, show_legend, meta) -> list:
    out = []
    lo, hi = meta["x_range"]
    min_ms = view.min_bubble_px * (hi - lo) / max(view.width_px, 1)
    for st in data.sets:
        i = vis[st.name]
        x0, x1 = data.to_ms(st.t0[i]), data.to_ms(st.t1[i])
        start = x0
        if st.group == "bubble":
            pad = np.maximum(min_ms - (x1 - x0), 0) / 2
            x0, x1 = x0 - pad, x1 + pad
        y0, y1 = _lane_y(st.lane[i], st.group)
        x, y = _rects(x0, x1, y0, y1)
        if st.group == "bubble":
            meta["bubbles"] += len(i)
        out.append(go.Scattergl(
            x=x, y=y, mode="lines", fill="toself", fillcolor=st.colour, line=dict(width=0, color=st.colour),
            name=prefix + st.name, legendgroup=st.name, showlegend=_shown(show_legend, st.name),
            hoverinfo="skip", **common))
        # Hover targets: scattergl cannot hover a fill, so an invisible point sits in each span's middle.
        mid = (np.maximum(x0, float(meta["x_range"][0])) + np.minimum(x1, float(meta["x_range"][1]))) / 2
        out.append(go.Scattergl(
            x=mid, y=(y0 + y1) / 2, mode="markers", marker=dict(size=6, color="rgba(0,0,0,0)"),
            customdata=np.column_stack([st.info[i], start]),
            text=[st.text[k] for k in i] if st.text is not None else None,
            meta=st.name, hovertemplate=_hover(st), name=prefix + st.name + " (hover)",
            legendgroup=st.name, showlegend=False, hoverlabel=dict(bgcolor="white"), **common))
    return out


def _aggregate_traces(data, vis, a, b, view, common, prefix, show_legend, meta) -> list:
    n_buckets = max(int(view.width_px / view.bucket_px), 1)
    edges = np.linspace(a, b, n_buckets + 1)
    width = edges[1] - edges[0]
    left, right = data.to_ms(edges[:-1]), data.to_ms(edges[1:])
    stack: dict[int, np.ndarray] = {}     # lane -> occupied fraction so far, per bucket
    out, hover = [], []
    for st in data.sets:
        i = vis[st.name]
        xs, ys, hx, hy, cd = [], [], [], [], []
        lanes = np.unique(st.lane[i]) if len(i) else []
        for lane in lanes:
            j = i[st.lane[i] == lane]
            occ = np.clip(_bucket_occupancy(st.t0[j], st.t1[j], edges) / width, 0.0, 1.0)
            lo, hi = BANDS[st.group]
            c = -float(lane)
            if st.group in STACKED_GROUPS:
                base = stack.setdefault(int(lane), np.zeros(n_buckets))
                bottom = np.minimum(base, 1.0)
                top = np.minimum(base + occ, 1.0)
                stack[int(lane)] = base + occ
            elif st.group == "bubble":
                # Too thin to see as a share of the lane: a rug above it, full at 10 % idle, never
                # under a quarter so a lone bubble shows; the hover gives the exact share.
                lo, hi = BANDS["bubble_rug"]
                bottom = np.zeros(n_buckets)
                top = np.where(occ > 0, np.clip(occ / RUG_FULL_IDLE, 0.25, 1.0), 0.0)
            else:
                bottom, top = np.zeros(n_buckets), occ
            # Heights in 1/64 of the band (under half a pixel); equal neighbours merge into one block.
            bq, tq = np.rint(bottom * HEIGHT_STEPS), np.rint(top * HEIGHT_STEPS)
            tq = np.where(occ > 0, np.minimum(np.maximum(tq, bq + 1), HEIGHT_STEPS), tq)  # a trace of work shows
            keep = np.flatnonzero(tq > bq)
            if not len(keep):
                continue
            brk = np.flatnonzero((np.diff(keep) != 1) | (np.diff(bq[keep]) != 0) | (np.diff(tq[keep]) != 0)) + 1
            run0 = np.concatenate([[0], brk])
            first_b, last_b = keep[run0], keep[np.concatenate([brk, [len(keep)]]) - 1]
            span = BANDS["phase"][1] - BANDS["phase"][0] if st.group in STACKED_GROUPS else hi - lo
            base_y = c + (BANDS["phase"][0] if st.group in STACKED_GROUPS else lo)
            y0 = base_y + span * bq[first_b] / HEIGHT_STEPS
            y1 = base_y + span * tq[first_b] / HEIGHT_STEPS
            x, y = _rects(left[first_b], right[last_b], y0, y1)
            xs.append(x)
            ys.append(y)
            # Per-block hover: spans starting in it, busy time, occupancy, first and last step.
            t0s = st.t0[j]
            starts = np.searchsorted(t0s, edges)
            count = np.add.reduceat(np.diff(starts)[keep], run0)
            busy = np.add.reduceat(occ[keep] * width, run0)
            n_b = last_b - first_b + 1
            # A block no span starts in is covered by the one that started before it.
            first = np.clip(np.where(count > 0, starts[first_b], starts[first_b] - 1), 0, len(j) - 1)
            last = np.clip(starts[last_b + 1] - 1, 0, len(j) - 1)
            steps = st.info[j, 0] if st.info.shape[1] else np.zeros(len(j))
            hx.append((left[first_b] + right[last_b]) / 2)
            hy.append((y0 + y1) / 2)
            cd.append(np.column_stack([count, busy / 1e3, 100 * busy / (n_b * width), steps[first], steps[last]]))
            if st.group == "bubble":
                meta["bubbles"] += len(first_b)
        if not xs:
            continue
        # float32 halves what travels; at this zoom a bucket is far wider than its precision.
        out.append(go.Scattergl(
            x=_join(xs).astype(np.float32), y=_join(ys).astype(np.float32), mode="lines", fill="toself",
            fillcolor=st.colour, line=dict(width=0, color=st.colour), name=prefix + st.name,
            legendgroup=st.name, showlegend=_shown(show_legend, st.name), hoverinfo="skip", **common))
        hover.append((st.name, np.concatenate(hx), np.concatenate(hy), np.concatenate(cd)))
    if hover:
        # One hover layer for every category: each WebGL trace costs the browser a draw set-up.
        out.append(go.Scattergl(
            x=np.concatenate([h[1] for h in hover]).astype(np.float32),
            y=np.concatenate([h[2] for h in hover]).astype(np.float32), mode="markers",
            marker=dict(size=6, color="rgba(0,0,0,0)"),
            customdata=np.concatenate([h[3] for h in hover]).astype(np.float32),
            text=[h[0] for h in hover for _ in range(len(h[1]))], hovertemplate=_HOVER["aggregate"],
            name=prefix + "aggregated (hover)", showlegend=False, hoverlabel=dict(bgcolor="white"), **common))
    return out


def _shown(show_legend: bool | set[str], name: str) -> bool:
    return name in show_legend if isinstance(show_legend, set) else bool(show_legend)


def _join(parts: list[np.ndarray]) -> np.ndarray:
    out = []
    for k, p in enumerate(parts):
        if k:
            out.append(np.array([np.nan]))
        out.append(p)
    return np.concatenate(out)


def _step_lines(data, a, b, view, common, prefix) -> list:
    lo = int(np.searchsorted(data.step_t0, a, side="left"))
    hi = int(np.searchsorted(data.step_t0, b, side="right"))
    if hi - lo == 0 or hi - lo > view.max_step_lines:
        return []
    x = data.to_ms(data.step_t0[lo:hi])
    top, bottom = BANDS["bubble"][1] + 0.1, -(len(data.lanes) - 1) + BANDS["bubble"][0]
    below = -(len(data.lanes) - 1) - 0.5
    n = len(x)
    xs = np.column_stack([x, x, np.full(n, np.nan)]).ravel()[:-1]
    ys = np.column_stack([np.full(n, top), np.full(n, bottom), np.full(n, np.nan)]).ravel()[:-1]
    return [go.Scattergl(x=xs, y=ys, mode="lines", line=dict(width=1, color=STEP_LINE_COLOUR, dash="dot"),
                         name=prefix + "step boundaries", hoverinfo="skip", showlegend=False, **common),
            go.Scattergl(x=x, y=np.full(n, below), mode="markers",
                         marker=dict(size=6, symbol="triangle-up", color="rgba(60,60,60,0.35)"),
                         customdata=data.step_ids[lo:hi], hovertemplate="step %{customdata} begins (launch)"
                         "<extra></extra>", name=prefix + "step starts", showlegend=False, **common)]


def _sync_traces(data, a, b, view, aggregate, common, prefix, show_legend, meta) -> list:
    sm = data.syncs
    i = _visible(sm, a, b)
    meta["syncs"] = int(len(i))
    if not len(i):
        return []
    x = data.to_ms(sm.t0[i])
    y = -sm.lane[i].astype(np.float64) + SYNC_MARKER_DY
    marker = dict(symbol="triangle-down", size=11, color=SYNC_MARKER_COLOUR, line=dict(width=1, color="white"))
    cd = np.column_stack([sm.step[i], (sm.t1[i] - sm.t0[i]) / 1e3, sm.idle_ns[i] / 1e3])
    text = [f"{sm.site[k]}<br>reason: {sm.reason[k]}" for k in i]
    template = _HOVER["sync"]
    if aggregate and len(i) > view.width_px / 4:
        # One marker per bucket of a few pixels: count, summed wait and idle, one example site.
        n_buckets = max(int(view.width_px / 4), 1)
        edges = np.linspace(a, b, n_buckets + 1)
        k = np.clip(np.searchsorted(edges, sm.t0[i], side="right") - 1, 0, n_buckets - 1)
        key = k * 1000 + sm.lane[i]
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        x = data.to_ms((edges[uniq // 1000] + edges[uniq // 1000 + 1]) / 2)
        y = y[first]
        cd = np.column_stack([np.bincount(inv), np.bincount(inv, cd[:, 1]), np.bincount(inv, cd[:, 2])])
        text = [text[f] for f in first]
        template = _HOVER["sync_aggregate"]
    return [go.Scattergl(x=x, y=y, mode="markers", marker=marker, customdata=cd, text=text,
                         hovertemplate=template, name=prefix + "accidental sync", legendgroup="accidental sync",
                         showlegend=_shown(show_legend, "accidental sync"), hoverlabel=dict(bgcolor="white"), **common)]


def lane_axis(data: TimelineData) -> dict:
    """y-axis settings: one labelled lane per host thread and device stream, top to bottom."""
    n = len(data.lanes)
    return dict(tickvals=[-i for i in range(n)], ticktext=[ln.label for ln in data.lanes],
                range=[-(n - 1) - 0.6, 0.65], fixedrange=True, showgrid=False, zeroline=False)


def window_shapes(data: TimelineData, xref: str = "x", yref: str = "y domain") -> list[dict]:
    """Grey out what lies outside the analysis window (warm-up and drain)."""
    if not data.window:
        return []
    lo, hi = data.full_range_ms()
    w0, w1 = float(data.to_ms(data.window[0])), float(data.to_ms(data.window[1]))
    shade = dict(type="rect", xref=xref, yref=yref, y0=0, y1=1, fillcolor="rgba(0,0,0,0.05)",
                 line=dict(width=0), layer="below")
    out = []
    if lo < w0:
        out.append({**shade, "x0": lo, "x1": w0})
    if hi > w1:
        out.append({**shade, "x0": w1, "x1": hi})
    return out


def timeline_figure(data: TimelineData, view: View = View(), title: str | None = None) -> go.Figure:
    """The whole timeline figure for ``view``; ``layout.meta`` says what was drawn."""
    traces, meta = timeline_traces(data, view)
    n = len(data.lanes)
    fig = go.Figure(data=traces)
    fig.update_layout(
        template="plotly_white", title=dict(text=title, x=0.01) if title else None,
        height=140 + 70 * n, margin=dict(l=120, r=20, t=70 if title else 40, b=50),
        hovermode="closest", hoverdistance=40, dragmode="zoom", meta=meta,
        legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0, font=dict(size=11)),
        xaxis=dict(title="time from window start (ms)", showgrid=True, zeroline=False,
                   range=list(view.x_range) if view.x_range else list(data.full_range_ms()),
                   autorange=False if view.x_range else True),
        yaxis=lane_axis(data), shapes=window_shapes(data),
        uirevision="timeline",
    )
    return fig


def compare_figure(a: TimelineData, b: TimelineData, view: View = View(),
                   labels: tuple[str, str] = ("A", "B")) -> go.Figure:
    """Two timelines one above the other on one shared x axis, each relative to its own
    window start, so zooming one zooms both and equal x means equal time into the run."""
    ra, rb = a.full_range_ms(), b.full_range_ms()
    full = (min(ra[0], rb[0]), max(ra[1], rb[1]))
    v = View(view.x_range or full, view.width_px, view.max_spans, view.bucket_px, view.max_step_lines,
             view.min_bubble_px)
    na, nb = len(a.lanes), len(b.lanes)
    gap = 0.12
    # Domains proportional to lane counts; A on top.
    h = (1 - gap) / (na + nb)
    dom_b = [0.0, h * nb]
    dom_a = [h * nb + gap, 1.0]
    ta, meta_a = timeline_traces(a, v, "x", "y")
    shown = {t.legendgroup for t in ta if t.showlegend}
    tb, meta_b = timeline_traces(b, v, "x", "y2",
                                 show_legend={st.name for st in b.sets} - shown | ({"accidental sync"} - shown))
    fig = go.Figure(data=ta + tb)
    fig.update_layout(
        template="plotly_white", height=200 + 70 * (na + nb), margin=dict(l=120, r=20, t=40, b=50),
        hovermode="closest", hoverdistance=40, dragmode="zoom", uirevision="compare",
        meta={"a": meta_a, "b": meta_b, "labels": list(labels)},
        legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0, font=dict(size=11)),
        xaxis=dict(title="time from each trace's window start (ms)", anchor="y2",
                   range=list(view.x_range) if view.x_range else list(full),
                   autorange=False if view.x_range else True, zeroline=False),
        yaxis={**lane_axis(a), "domain": dom_a},
        yaxis2={**lane_axis(b), "domain": dom_b},
        shapes=window_shapes(a, "x", "y domain") + window_shapes(b, "x", "y2 domain"),
        annotations=[dict(text=f"<b>{labels[0]}</b>", xref="paper", yref="paper", x=0, y=dom_a[1],
                          xanchor="left", yanchor="bottom", showarrow=False, xshift=-115),
                     dict(text=f"<b>{labels[1]}</b>", xref="paper", yref="paper", x=0, y=dom_b[1],
                          xanchor="left", yanchor="bottom", showarrow=False, xshift=-115)],
    )
    return fig


def placeholder_figure(message: str, height: int = 260) -> go.Figure:
    """An empty figure carrying a message (no trace loaded, or it failed)."""
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=height, xaxis=dict(visible=False),
                      yaxis=dict(visible=False), margin=dict(l=20, r=20, t=20, b=20),
                      annotations=[dict(text=message, showarrow=False, x=0.5, y=0.5, xref="paper",
                                        yref="paper", font=dict(size=14, color="#666"))])
    return fig
