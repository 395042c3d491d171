"""Drawing a ``TimelineData`` for a ``View``: WebGL traces that stay honest at every zoom.

Each category is one ``scattergl`` trace of filled rectangles separated by NaN gaps
(never one shape per span). Nothing is widened to be seen:

* a span at least ``min_exact_px`` wide is drawn as itself, at full lane height;
* narrower spans add their busy time to their pixel column, and the column is drawn
  with a height equal to the share of it the category occupies (stacked per lane:
  ops and bubbles on a device lane, phases on a host lane), so a lane of 0.04 px
  copies shows as short ticks and a 3 %-idle run's compute lane as 3 % bubble;
* when the view holds more than ``max_spans`` spans, every span is drawn that way
  (a 500k-span trace is a utilisation strip) and hover targets are per block.

Heights are quantised to 1/64 of a lane; a column with any work in it shows at least
that much (the hover gives the exact share). Sync markers and step ticks are symbols,
not areas: they keep their size. The marks (the requests lane, sync markers) are drawn by
``draw_marks.py`` on the same ``Frame`` (``frame.py``).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from photon_trace.dashboard.timeline.data import SpanSet, TimelineData
from photon_trace.dashboard.timeline.draw_marks import REQUEST_END_NAMES, request_traces, sync_traces
from photon_trace.dashboard.timeline.frame import BANDS, HALF, HEIGHT_STEPS, Frame, occupancy, rects, shown, uid
from photon_trace.dashboard.timeline.marks import SYNC_NAME, SYNC_OUTSIDE_NAME
from photon_trace.dashboard.timeline.palette import legend_name
from photon_trace.dashboard.timeline.text import plain
from photon_trace.dashboard.timeline.view import View

STEP_LINE_COLOUR = "rgba(60,60,60,0.18)"
STACKED = ("phase", "device", "bubble")   # share a lane's height in a pixel column

DUR = "%{customdata[3]:.4~s}s"
# What a click on a trace's points selects (``curves``: one entry per trace, in figure order).
CLICK_SPAN, CLICK_BLOCK, CLICK_SYNC, CLICK_REQUESTS, CLICK_REQUEST_END = 1, 2, 3, 4, 5
_HOVER = {
    "phase": "<b>%{meta}</b> · step %{customdata[0]} · slot %{customdata[1]} · rows %{customdata[2]}"
             "<br>duration " + DUR + " · start %{customdata[5]:.6~s}s<extra></extra>",
    "subphase": "<b>%{meta}</b> · step %{customdata[0]} · slot %{customdata[1]} · rows %{customdata[2]}"
                "<br>duration " + DUR + "<extra></extra>",
    "device": "<b>%{meta}</b> · step %{customdata[0]} · slot %{customdata[1]} · rows %{customdata[2]}"
              "<br>duration " + DUR + " · start %{customdata[5]:.6~s}s"
              "<br>started %{customdata[4]:.3~s}s after it was enqueued<extra></extra>",
    "wait": "<b>%{meta}</b> · step %{customdata[0]}<br>%{text}<br>waited " + DUR + "<extra></extra>",
    "bubble": "<b>%{meta}</b> · step %{customdata[0]}<br>device idle " + DUR + "<br>%{text}<extra></extra>",
    "aggregate": "<b>%{text}</b> · %{customdata[0]:,} spans start here · steps %{customdata[3]}–%{customdata[4]}"
                 "<br>busy %{customdata[1]:.3~s}s = %{customdata[2]:.1f}% of this block (its height)"
                 "<br>click: statistics around here<extra></extra>",
}


def draw(data: TimelineData, view: View = View(), xaxis: str = "x", yaxis: str = "y", prefix: str = "",
         show_legend: bool | set[str] = True) -> tuple[list, dict]:
    """The traces for ``view`` and a ``meta`` dict (mode, counts drawn) for tests and the page."""
    f = Frame(data, view)
    # counted per lane by binary search (``lane_index.py``): no pass over a 10M-span trace
    n_visible = sum(st.by_lane.count_all(f.va, f.vb) for st in data.sets if st.group != "bubble")
    aggregate = n_visible > view.max_spans
    # What the page needs to zoom and pan on its own (assets/keys.js): the range drawn, the
    # pixel it was drawn for, and the trace's extent (nothing to fetch beyond it).
    meta: dict[str, Any] = {"mode": "aggregate" if aggregate else "exact", "spans_visible": n_visible,
                            "spans_total": data.n_spans, "x_range": [f.lo, f.hi], "axis": view.axis,
                            "data_range": [float(f.x(f.a)), float(f.x(f.b))], "px_s": f.px_ns / 1e9,
                            "full_range": list(data.full_range(view.axis)), "width_px": view.width_px,
                            # per set, for its spans' labels: its band, and the words a label starts
                            # with (a bubble's cause; a span with its own name, an imported op, uses it)
                            "bands": [list(BANDS[st.group]) for st in data.sets],
                            "label_names": [plain(legend_name(st.name).removeprefix("bubble: "))
                                            if st.text is None or st.group == "bubble" else None for st in data.sets],
                            "bubbles": sum(st.by_lane.count_all(f.a, f.b) for st in data.sets if st.group == "bubble"),
                            "in_columns": 0, "syncs": 0, "lanes": [ln.label for ln in data.lanes],
                            "analysed": data.analysed}
    common = dict(xaxis=xaxis, yaxis=yaxis)
    traces: list = []
    stack: dict[int, np.ndarray] = {}
    hover_blocks = []
    for k, st in enumerate(data.sets):
        xs, ys = [], []
        if aggregate:   # every span into its pixel column: per lane, searches over the index
            i = None
            meta["in_columns"] += st.by_lane.count_all(f.a, f.b)
            x, y, blocks = _column_blocks(st, _lane_columns(st, f), f, stack)
            hover_blocks += blocks
        else:
            i = st.by_lane.overlapping_all(f.a, f.b, st.t1)
            keep = (st.t1[i] - st.t0[i]) >= f.px_ns * view.min_exact_px
            wide, narrow = i[keep], i[~keep]
            meta["in_columns"] += len(narrow)
            if len(wide):
                y0, y1 = _band(st.lane[wide], st.group)
                x, y = rects(f.x(st.t0[wide]), f.x(st.t1[wide]), y0, y1)
                xs.append(x)
                ys.append(y)
            x, y, _ = _column_blocks(st, _subset_columns(st, narrow, f), f, stack)
        if len(x):
            xs.append(x)
            ys.append(y)
        if xs:
            # float32 halves what travels when zoomed out (a column is far wider than its precision)
            dtype = np.float32 if aggregate else np.float64
            traces.append(go.Scattergl(
                x=_join(xs).astype(dtype), y=_join(ys).astype(dtype), mode="lines", fill="toself", fillcolor=st.colour,
                line=dict(width=0, color=st.colour), name=prefix + plain(legend_name(st.name)), uid=uid(prefix + st.name),
                legendgroup=st.name, showlegend=shown(show_legend, st.name), hoverinfo="skip", **common))
        if i is not None and len(i):
            traces.append(_span_hover(st, i, f, k, prefix, common))
    if hover_blocks:
        traces.append(_block_hover(hover_blocks, f, prefix, common))
    if not aggregate:
        traces += _step_lines(data, f, prefix, common)
    traces += request_traces(data, f, prefix, show_legend, common)
    traces += sync_traces(data, f, aggregate, prefix, show_legend, common, meta)
    meta["curves"] = curves(data, traces, prefix)
    return traces, meta


def curves(data: TimelineData, traces: list, prefix: str = "") -> list:
    """Per trace, ``[what a click on it selects, category index]`` (or None): clicks arrive as a
    curve number and a point's x and y, so this is how the server knows what was clicked."""
    index = {prefix + plain(st.name) + " (hover)": k for k, st in enumerate(data.sets)}
    out = []
    for t in traces:
        name = t.name or ""
        if name in index:
            out.append([CLICK_SPAN, index[name]])
        elif name == prefix + "aggregated (hover)":
            out.append([CLICK_BLOCK, -1])
        elif name in (prefix + SYNC_NAME, prefix + SYNC_OUTSIDE_NAME):
            out.append([CLICK_SYNC, -1])
        elif name == prefix + "requests (hover)":
            out.append([CLICK_REQUESTS, -1])
        elif name in (prefix + REQUEST_END_NAMES["finished"], prefix + REQUEST_END_NAMES["aborted"]):
            out.append([CLICK_REQUEST_END, -1])
        else:
            out.append(None)
    return out


def _band(lanes: np.ndarray, group: str) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = BANDS[group]
    c = -lanes.astype(np.float64)
    return c + lo, c + hi


def _lane_columns(st: SpanSet, f: Frame):
    """Per lane with spans in the drawn range: its busy share of each pixel column, its starts
    and its spans' steps (views of the set's arrays, no copies)."""
    ix = st.by_lane
    for k in range(len(ix)):
        if ix.count(k, f.a, f.b):
            s, e = ix.segment(k)
            yield int(ix.lanes[k]), ix.busy(k, f.edges), st.t0[s:e], st.info[s:e, 0]


def _subset_columns(st: SpanSet, idx: np.ndarray, f: Frame):
    """The same for the spans ``idx`` only (zoomed in: those too narrow to draw as themselves)."""
    for lane in np.unique(st.lane[idx]):
        j = idx[st.lane[idx] == lane]
        yield int(lane), occupancy(st.t0[j], st.t1[j], f.edges), st.t0[j], st.info[j, 0]


def _column_blocks(st: SpanSet, lanes, f: Frame, stack: dict):
    """Per pixel column, the share of it the spans occupy (``lanes``: per lane, busy ns per
    column, sorted starts and steps), as blocks of that height (stacked on what the lane
    already holds); equal neighbours merge into one block."""
    xs, ys, blocks = [], [], []
    left, right = f.x(f.edges[:-1]), f.x(f.edges[1:])
    for lane, busy_ns, t0s, steps in lanes:
        occ = np.clip(busy_ns / f.col_ns, 0.0, 1.0)
        lo, hi = BANDS[st.group]
        if st.group in STACKED:
            base = stack.setdefault(lane, np.zeros(f.n_cols))
            bottom, top = np.minimum(base, 1.0), np.minimum(base + occ, 1.0)
            stack[lane] = base + occ
        else:
            bottom, top = np.zeros(f.n_cols), occ
        bq, tq = np.rint(bottom * HEIGHT_STEPS), np.rint(top * HEIGHT_STEPS)
        tq = np.where(occ > 0, np.minimum(np.maximum(tq, bq + 1), HEIGHT_STEPS), tq)   # any work shows
        bq = np.minimum(bq, tq - (occ > 0))
        keep = np.flatnonzero(tq > bq)
        if not len(keep):
            continue
        brk = np.flatnonzero((np.diff(keep) != 1) | (np.diff(bq[keep]) != 0) | (np.diff(tq[keep]) != 0)) + 1
        run0 = np.concatenate([[0], brk])
        first_c, last_c = keep[run0], keep[np.concatenate([brk, [len(keep)]]) - 1]
        base_y = -float(lane) + lo
        y0 = base_y + (hi - lo) * bq[first_c] / HEIGHT_STEPS
        y1 = base_y + (hi - lo) * tq[first_c] / HEIGHT_STEPS
        x, y = rects(left[first_c], right[last_c], y0, y1)
        xs.append(x)
        ys.append(y)
        # Per block: spans starting in it, busy time, share, first and last step (for the hover).
        # (integer starts: t < e exactly when t < ceil(e); an int64 search copies nothing)
        starts = np.searchsorted(t0s, np.ceil(f.edges).astype(np.int64))
        count = np.add.reduceat(np.diff(starts)[keep], run0)
        busy = np.add.reduceat(occ[keep] * f.col_ns, run0)
        n_c = last_c - first_c + 1
        first = np.clip(np.where(count > 0, starts[first_c], starts[first_c] - 1), 0, len(t0s) - 1)
        last = np.clip(starts[last_c + 1] - 1, 0, len(t0s) - 1)
        blocks.append((st.name, (left[first_c] + right[last_c]) / 2, (y0 + y1) / 2,
                       np.column_stack([count, busy / 1e9, 100 * busy / (n_c * f.col_ns), steps[first], steps[last],
                                        left[first_c], right[last_c]])))
    if not xs:
        return np.zeros(0), np.zeros(0), []
    return _join(xs), _join(ys), blocks


def _hover(st: SpanSet) -> str:
    """The group's hover; spans that carry their own name (an imported trace's ops) show it too."""
    if st.text is None or st.group in ("wait", "bubble"):
        return _HOVER[st.group]
    return _HOVER[st.group].replace("<extra>", "<br>%{text}<extra>", 1)


def _span_hover(st: SpanSet, i: np.ndarray, f: Frame, k: int, prefix: str, common: dict) -> go.Scattergl:
    """Hover and click targets: scattergl cannot hover a fill, so an invisible point sits in
    each span's visible middle. customdata: step, slot, rows, duration s, delay s, start s,
    set, span (the last two say what a click selected)."""
    x0, x1 = f.x(st.t0[i]), f.x(st.t1[i])
    mid = (np.maximum(x0, f.x(f.a)) + np.minimum(x1, f.x(f.b))) / 2
    y0, y1 = _band(st.lane[i], st.group)
    info = st.info[i].copy()
    info[:, 3:5] /= 1e9
    cd = np.column_stack([info, x0])
    return go.Scattergl(
        x=mid, y=(y0 + y1) / 2, mode="markers", marker=dict(size=8, color="rgba(0,0,0,0)"), customdata=cd,
        text=[plain(st.text[m]) for m in i] if st.text is not None else None, meta=plain(legend_name(st.name)),
        hovertemplate=_hover(st), name=prefix + plain(st.name) + " (hover)", uid=uid(prefix + st.name + " (hover)"),
        legendgroup=st.name, showlegend=False, hoverlabel=dict(bgcolor="white"), **common)


def _block_hover(blocks: list, f: Frame, prefix: str, common: dict) -> go.Scattergl:
    """One hover layer for every aggregated block: each WebGL trace costs the browser a set-up."""
    return go.Scattergl(
        x=np.concatenate([b[1] for b in blocks]).astype(np.float32),
        y=np.concatenate([b[2] for b in blocks]).astype(np.float32),
        mode="markers", marker=dict(size=6, color="rgba(0,0,0,0)"),
        customdata=np.concatenate([b[3] for b in blocks]).astype(np.float32),
        text=[plain(b[0]) for b in blocks for _ in range(len(b[1]))], hovertemplate=_HOVER["aggregate"],
        name=prefix + "aggregated (hover)", uid=uid(prefix + "aggregated (hover)"), showlegend=False,
        hoverlabel=dict(bgcolor="white"), **common)


def _join(parts: list[np.ndarray]) -> np.ndarray:
    out = []
    for k, p in enumerate(parts):
        if k:
            out.append(np.array([np.nan]))
        out.append(np.asarray(p, dtype=np.float64))
    return np.concatenate(out) if out else np.zeros(0)


def _step_lines(data: TimelineData, f: Frame, prefix: str, common: dict) -> list:
    lo = int(np.searchsorted(data.step_t0, f.a, side="left"))
    hi = int(np.searchsorted(data.step_t0, f.b, side="right"))
    if hi - lo == 0 or hi - lo > f.view.max_step_lines:
        return []
    x = f.x(data.step_t0[lo:hi])
    top, bottom = HALF + 0.18, -(len(data.lanes) - 1) - HALF
    below = -(len(data.lanes) - 1) - 0.5
    n = len(x)
    xs = np.column_stack([x, x, np.full(n, np.nan)]).ravel()[:-1]
    ys = np.column_stack([np.full(n, top), np.full(n, bottom), np.full(n, np.nan)]).ravel()[:-1]
    return [go.Scattergl(x=xs, y=ys, mode="lines", line=dict(width=1, color=STEP_LINE_COLOUR, dash="dot"),
                         name=prefix + "step boundaries", uid=uid(prefix + "step boundaries"), hoverinfo="skip",
                         showlegend=False, **common),
            go.Scattergl(x=x, y=np.full(n, below), mode="markers",
                         marker=dict(size=6, symbol="triangle-up", color="rgba(60,60,60,0.35)"),
                         customdata=data.step_ids[lo:hi], hovertemplate="step %{customdata} begins (launch)"
                         "<extra></extra>", name=prefix + "step starts", uid=uid(prefix + "step starts"),
                         showlegend=False, **common)]
