"""Drawing the timeline's marks (the requests lane and where each request ended, accidental
syncs and their links to the bubbles they caused) for one ``frame.Frame``: the same honest
rules as the spans (``draw.py``). What the marks are is ``marks.py``."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from photon_trace.dashboard.timeline.data import TimelineData
from photon_trace.dashboard.timeline.frame import BANDS, HALF, HEIGHT_STEPS, SYNC_DY, Frame, rects, shown, uid, visible
from photon_trace.dashboard.timeline.marks import REQUEST_STATES, SYNC_NAME, SYNC_OUTSIDE_NAME, mean_counts
from photon_trace.dashboard.timeline.palette import REQUEST_COLOURS
from photon_trace.dashboard.timeline.text import plain

SYNC_COLOUR = "#B00020"
MAX_LINKS = 400                   # sync -> bubble links drawn when this few are visible
REQUEST_NAMES = {"decode": "requests: decoding", "prefill": "requests: prefill", "queued": "requests: queued"}
REQUEST_END_NAMES = {"finished": "requests: finished", "aborted": "requests: aborted"}
REQUEST_END_COLOURS = {"finished": "#2E7D32", "aborted": "#C62828"}
_HOVER = {
    "sync": f"<b>{SYNC_NAME}</b> · step %{{customdata[0]}}<br>site: %{{text}}"
            "<br>host waited %{customdata[1]:.3~s}s · device idle caused %{customdata[2]:.3~s}s<extra></extra>",
    "sync_aggregate": f"<b>%{{customdata[0]:,}} {SYNC_NAME}s</b> here<br>e.g. %{{text}}"
                      "<br>host waited %{customdata[1]:.3~s}s · device idle caused %{customdata[2]:.3~s}s"
                      "<extra></extra>",
    "requests": "<b>requests</b> (mean over this column)<br>%{customdata[0]:.1f} decoding · "
                "%{customdata[1]:.1f} in prefill · %{customdata[2]:.1f} queued<extra></extra>",
}
FINISHED_HOVER = {
    "finished": "<b>request %{customdata[0]} finished</b> (finalized) · %{customdata[1]} output tokens"
                "<br>%{customdata[2]:.4~s}s after it arrived<br>click: its lifecycle<extra></extra>",
    "aborted": "<b>request %{customdata[0]} aborted</b> after %{customdata[1]} output tokens"
               "<br>%{customdata[2]:.4~s}s after it arrived<br>click: its lifecycle<extra></extra>",
    "finished (binned)": "<b>%{customdata[0]:,} requests finished here</b> (finalized)"
                         "<br>e.g. request %{customdata[1]}<extra></extra>",
    "aborted (binned)": "<b>%{customdata[0]:,} requests aborted here</b><br>e.g. request %{customdata[1]}"
                        "<extra></extra>",
}


def request_traces(data: TimelineData, f: Frame, prefix: str, show_legend, common: dict) -> list:
    """The requests lane: how many requests decode, prefill and wait, stacked, as each pixel
    pair's time-weighted mean (exact once a column is shorter than the gaps between changes).
    Drawn as rectangles (equal neighbours merged), like every other lane: one big outline
    polygon would cost the browser its triangulation."""
    rs = data.requests
    if rs is None or not rs.peak:
        return []
    n = max(f.n_cols // 2, 1)
    edges = np.linspace(f.a, f.b, n + 1)
    mean = mean_counts(rs, edges)
    x = f.x(edges)
    c = -float(rs.lane)
    lo, hi = BANDS["requests"]
    out = []
    below = np.zeros(n)
    for s, state in enumerate(REQUEST_STATES):
        top = below + mean[:, s]
        bq = np.rint(below / rs.peak * HEIGHT_STEPS)
        tq = np.rint(top / rs.peak * HEIGHT_STEPS)
        keep = np.flatnonzero(tq > bq)
        below = top
        if not len(keep):
            continue
        brk = np.flatnonzero((np.diff(keep) != 1) | (np.diff(bq[keep]) != 0) | (np.diff(tq[keep]) != 0)) + 1
        run0 = np.concatenate([[0], brk])
        first, last = keep[run0], keep[np.concatenate([brk, [len(keep)]]) - 1]
        rx, ry = rects(x[first], x[last + 1], c + lo + (hi - lo) * bq[first] / HEIGHT_STEPS,
                        c + lo + (hi - lo) * tq[first] / HEIGHT_STEPS)
        name = REQUEST_NAMES[state]
        out.append(go.Scattergl(
            x=rx, y=ry, mode="lines", fill="toself", fillcolor=REQUEST_COLOURS[state],
            line=dict(width=0, color=REQUEST_COLOURS[state]), name=prefix + name, uid=uid(prefix + name),
            legendgroup=name, showlegend=shown(show_legend, name), hoverinfo="skip", **common))
    mid = (x[:-1] + x[1:]) / 2
    pick = np.linspace(0, n - 1, min(n, 200)).astype(int)
    out.append(go.Scattergl(x=mid[pick], y=np.full(len(pick), c), mode="markers",
                            marker=dict(size=8, color="rgba(0,0,0,0)"), customdata=mean[pick],
                            hovertemplate=_HOVER["requests"], name=prefix + "requests (hover)",
                            uid=uid(prefix + "requests (hover)"), showlegend=False,
                            hoverlabel=dict(bgcolor="white"), **common))
    return out + finished_traces(data, f, prefix, show_legend, common)


def finished_traces(data: TimelineData, f: Frame, prefix: str, show_legend, common: dict) -> list:
    """A mark just above the requests lane where each request ended: finalized (its last token)
    or aborted. More ends than a mark per 4 px: one mark per 4-px bin, its hover the count."""
    rs = data.requests
    ends = rs.ended()
    t_end = rs.times[ends, 3]
    ends = ends[(t_end >= f.a) & (t_end <= f.b)]
    y = -float(rs.lane) + SYNC_DY
    out = []
    for aborted, state in ((False, "finished"), (True, "aborted")):
        j = ends[rs.aborted[ends] == aborted]
        if not len(j):
            continue
        times = rs.times[j]
        cd = np.column_stack([rs.req_id[j], rs.output_tokens[j],
                              np.where(times[:, 0] >= 0, (times[:, 3] - times[:, 0]) / 1e9, np.nan)])
        x, template = f.x(times[:, 3]), FINISHED_HOVER[state]
        if len(j) > f.span_px / 4:
            n_b = max(int(f.span_px / 4), 1)
            edges = np.linspace(f.a, f.b, n_b + 1)
            kb = np.clip(np.searchsorted(edges, times[:, 3], side="right") - 1, 0, n_b - 1)
            bins, first, inv = np.unique(kb, return_index=True, return_inverse=True)
            x = f.x((edges[bins] + edges[bins + 1]) / 2)
            cd = np.column_stack([np.bincount(inv), cd[first, 0]])
            template = FINISHED_HOVER[state + " (binned)"]
        name = REQUEST_END_NAMES[state]
        out.append(go.Scattergl(
            x=x, y=np.full(len(x), y), mode="markers", customdata=cd, hovertemplate=template,
            marker=dict(symbol="diamond" if not aborted else "x", size=8, color=REQUEST_END_COLOURS[state],
                        line=dict(width=1, color="white")),
            name=prefix + name, uid=uid(prefix + name), legendgroup=name, showlegend=shown(show_legend, name),
            hoverlabel=dict(bgcolor="white"), **common))
    return out


def sync_traces(data: TimelineData, f: Frame, aggregate: bool, prefix: str, show_legend, common: dict,
                 meta: dict) -> list:
    sm = data.syncs
    i = visible(sm.t0, sm.t1, f.a, f.b)
    meta["syncs"] = int(np.count_nonzero(sm.in_window[i])) if len(i) else 0
    meta["syncs_outside"] = int(len(i) - meta["syncs"])
    out = []
    for inside, name in ((True, SYNC_NAME), (False, SYNC_OUTSIDE_NAME)):
        j = i[sm.in_window[i] == inside]
        if not len(j):
            continue
        x = f.x(sm.t0[j])
        y = -sm.lane[j].astype(np.float64) + SYNC_DY
        marker = dict(symbol="triangle-down" if inside else "triangle-down-open", size=11, color=SYNC_COLOUR,
                      line=dict(width=1 if inside else 2, color="white" if inside else SYNC_COLOUR))
        cd = np.column_stack([sm.step[j], (sm.t1[j] - sm.t0[j]) / 1e9, sm.idle_ns[j] / 1e9])
        shown_j = j       # the markers whose hover text is built: every one, or each bin's first
        template = _HOVER["sync"]
        if aggregate and len(j) > f.span_px / 4:
            n_b = max(int(f.span_px / 4), 1)
            edges = np.linspace(f.a, f.b, n_b + 1)
            kb = np.clip(np.searchsorted(edges, sm.t0[j], side="right") - 1, 0, n_b - 1)
            key = kb * 1000 + sm.lane[j]
            uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
            x = f.x((edges[uniq // 1000] + edges[uniq // 1000 + 1]) / 2)
            y = y[first]
            cd = np.column_stack([np.bincount(inv), np.bincount(inv, cd[:, 1]), np.bincount(inv, cd[:, 2])])
            shown_j = j[first]
            template = _HOVER["sync_aggregate"]
        text = _sync_text(sm, shown_j, inside)
        out.append(go.Scattergl(x=x, y=y, mode="markers", marker=marker, customdata=cd, text=text,
                                hovertemplate=template, name=prefix + name, uid=uid(prefix + name),
                                legendgroup=SYNC_NAME, showlegend=shown(show_legend, name),
                                hoverlabel=dict(bgcolor="white"), **common))
    if not aggregate:
        out += sync_links(data, f, i, prefix, common)
    return out


def _sync_text(sm, j: np.ndarray, inside: bool) -> list[str]:
    """Each marker's hover: its site and reason (a few distinct ones, made plain once each)."""
    made: dict[tuple[str, str], str] = {}
    tail = "" if inside else "<br>outside the analysis window: not counted"
    out = []
    for m in j.tolist():
        key = (sm.site[m], sm.reason[m])
        if key not in made:
            made[key] = f"{plain(key[0])}<br>reason: {plain(key[1])}{tail}"
        out.append(made[key])
    return out


def sync_links(data: TimelineData, f: Frame, i: np.ndarray, prefix: str, common: dict) -> list:
    """A dotted line from each visible sync marker to each bubble it caused (on the device
    lane, often a few ms later), so the wait and the idle it cost read as one event."""
    sm = data.syncs
    if not len(i) or not len(sm.link_marker):
        return []
    m = np.isin(sm.link_marker, i)
    km, kb = sm.link_marker[m], sm.link_bubble[m]
    if not len(km) or len(km) > MAX_LINKS:
        return []
    b_mid = np.array([(data.bubbles[b].t0 + data.bubbles[b].t1) / 2 for b in kb])
    x0, x1 = f.x(sm.t0[km]), f.x(b_mid)
    y0 = -sm.lane[km].astype(np.float64) + SYNC_DY - 0.05
    y1 = np.full(len(km), -float(data.compute_lane) + HALF)
    nan = np.full(len(km), np.nan)
    return [go.Scattergl(x=np.column_stack([x0, x1, nan]).ravel()[:-1], y=np.column_stack([y0, y1, nan]).ravel()[:-1],
                         mode="lines", line=dict(width=1, color="rgba(176,0,32,0.55)", dash="dot"),
                         name=prefix + "sync → the bubble it caused", uid=uid(prefix + "sync links"),
                         legendgroup=SYNC_NAME, showlegend=False, hoverinfo="skip", **common)]
