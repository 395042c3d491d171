"""Aggregate statistics over a timeline: a selected time range (per name and per lane), and
each device stream's idle broken down, HTA-style.

Pure functions over ``TimelineData`` arrays returning rows (column -> formatted string)
and a figure; no trace is touched again.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from photon_trace.dashboard.panels.figures import fmt_duration
from photon_trace.dashboard.timeline.data import TimelineData
from photon_trace.dashboard.timeline.text import plain

HOST_LATE = "idle: host late (nothing enqueued yet)"
NO_WORK = "idle: no work (nothing enqueued on this stream)"
LATENCY = "idle: launch latency (enqueued, not started)"
BREAKDOWN = (("busy", "#2D69B4"), (HOST_LATE, "#F0871E"), (NO_WORK, "#E1E1C3"), (LATENCY, "#969696"))
"""The analysed stream's idle before an op was enqueued is the host being late; another
stream's (the copy stream waiting for a copy-back) is only that stream having nothing to do."""


def range_stats(data: TimelineData, a: int, b: int) -> dict:
    """Statistics of ``[a, b]`` (ns): per name and lane, spans overlapping it (count, time inside
    it, mean/p50/p99 of their durations); and the device idle inside it by cause."""
    rows, idle_rows = [], []
    span = max(b - a, 1)
    for st in data.sets:
        i = np.flatnonzero((st.t0 < b) & (st.t1 > a))
        if not len(i):
            continue
        for lane in np.unique(st.lane[i]):
            j = i[st.lane[i] == lane]
            dur = (st.t1[j] - st.t0[j]).astype(np.float64)
            inside = float(np.sum(np.minimum(st.t1[j], b) - np.maximum(st.t0[j], a)))
            row = {"name": st.name, "lane": data.lanes[int(lane)].label, "count": f"{len(j):,}",
                   "total": fmt_duration(inside), "share of range": f"{100 * inside / span:.1f} %",
                   "mean": fmt_duration(float(dur.mean())), "p50": fmt_duration(float(np.percentile(dur, 50))),
                   "p99": fmt_duration(float(np.percentile(dur, 99)))}
            if st.group == "bubble":
                idle_rows.append({"cause": st.name.removeprefix("bubble: "), "bubbles": f"{len(j):,}",
                                  "idle": fmt_duration(inside), "share of range": f"{100 * inside / span:.1f} %",
                                  "_ns": inside})
            else:
                rows.append((inside, row))
    rows.sort(key=lambda r: -r[0])
    busy = _union_inside(data, data.compute_lane, a, b)
    idle_rows.sort(key=lambda r: -r["_ns"])
    bubble_ns = sum(r.pop("_ns") for r in idle_rows)
    return {"range": (a, b), "duration": fmt_duration(span), "rows": [r for _, r in rows],
            "idle": fmt_duration(span - busy), "idle_share": (span - busy) / span,
            "idle_rows": idle_rows + ([{"cause": "gaps under 20 µs (dispatch)", "bubbles": "",
                                        "idle": fmt_duration(max(span - busy - bubble_ns, 0)),
                                        "share of range": f"{100 * max(span - busy - bubble_ns, 0) / span:.1f} %"}]
                                      if span - busy - bubble_ns > 0 else [])}


def _lane_ops(data: TimelineData, lane: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t0, t1, enqueued) of the device ops on ``lane``, by start."""
    parts = []
    for st in data.sets:
        k = np.flatnonzero(st.by_lane.lanes == lane) if st.group == "device" else []
        if len(k):   # the lane's spans are one slice of the set (sorted by lane): no mask over all of them
            s, e = st.by_lane.segment(int(k[0]))
            parts.append((st.t0[s:e], st.t1[s:e], st.t0[s:e] - st.info[s:e, 4]))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    t0, t1, enq = (np.concatenate([p[k] for p in parts]) for k in range(3))
    o = np.argsort(t0, kind="stable")
    return t0[o], t1[o], enq[o]


def _union_inside(data: TimelineData, lane: int, a: int, b: int) -> float:
    t0, t1, _ = _lane_ops(data, lane)
    t0, t1 = np.clip(t0, a, b), np.clip(t1, a, b)
    keep = t1 > t0
    t0, t1 = t0[keep], t1[keep]
    if not len(t0):
        return 0.0
    reach = np.maximum.accumulate(t1)
    starts = np.concatenate([[True], t0[1:] > reach[:-1]])
    run_end = np.maximum.reduceat(t1, np.flatnonzero(starts))
    return float(np.sum(run_end - t0[starts]))


def idle_breakdown(data: TimelineData) -> list[dict]:
    """Per device stream over the analysis window: busy, idle before the next op was enqueued
    (on the analysed stream the host was late; on any other the stream had no work) and idle
    after (the device's launch latency), in ns and shares."""
    a, b = data.window or (data.t_min, data.t_max)
    span = max(b - a, 1)
    out = []
    for lane, ln in enumerate(data.lanes):
        if ln.kind != "device":
            continue
        t0, t1, enq = _lane_ops(data, lane)
        busy = _union_inside(data, lane, a, b)
        host_late = 0.0
        if len(t0):
            reach = np.maximum.accumulate(t1)
            g0 = np.concatenate([[a], reach[:-1]])        # the stream ran dry here ...
            g1 = t0                                       # ... until this op started
            c0, c1 = np.clip(g0, a, b), np.clip(g1, a, b)
            gap = np.maximum(c1 - c0, 0)
            host_late = float(np.sum(np.minimum(np.maximum(np.clip(enq, a, b) - c0, 0), gap)))
        idle = span - busy
        analysed = lane == data.compute_lane
        out.append({"stream": ln.name, "busy": busy / span, HOST_LATE: host_late / span if analysed else 0.0,
                    NO_WORK: 0.0 if analysed else host_late / span, LATENCY: max(idle - host_late, 0) / span,
                    "window_ns": span})
    return out


def idle_breakdown_figure(rows: list[dict]) -> go.Figure:
    """One stacked horizontal bar per device stream: busy, host-late (or no-work) idle,
    launch-latency idle; a part no stream has is left out of the legend."""
    fig = go.Figure()
    names = [r["stream"] for r in rows]
    for key, colour in BREAKDOWN:
        vals = [100 * r[key] for r in rows]
        if rows and not any(vals) and key != "busy":
            continue
        fig.add_trace(go.Bar(y=[plain(n) for n in names], x=vals, orientation="h", name=key, marker_color=colour,
                             text=[f"{v:.1f} %" for v in vals], textposition="inside", insidetextanchor="middle",
                             customdata=[fmt_duration(r[key] * r["window_ns"]) for r in rows],
                             hovertemplate="%{y}: " + key + " %{x:.2f} % (%{customdata})<extra></extra>"))
    fig.update_layout(template="plotly_white", barmode="stack", height=110 + 40 * len(rows),
                      margin=dict(l=80, r=20, t=30, b=40), legend=dict(orientation="h", y=1.15, x=0),
                      xaxis=dict(title="share of the analysis window (%)", range=[0, 100]),
                      yaxis=dict(title="stream", autorange="reversed"), meta={"streams": names})
    return fig
