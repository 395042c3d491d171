"""The timeline: host-thread and device-stream lanes, bubbles and flagged syncs.

Two pure steps, so a zoom re-draw never touches the trace again:

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

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from photon_trace.telemetry.records import Trace

HOST_PHASES = ("plan", "launch", "commit", "finalize")
HOST_SUBPHASES = ("stage", "mask_build", "mask_upload", "stream_out")
DEVICE_OPS = ("prefill", "forward", "stage", "sample", "masked_sample", "copy_back", "mask_upload")
BUBBLE_CAUSES = ("host_bound", "commit_wait", "accidental_sync", "copy_wait")
STREAM_ORDER = ("compute", "copy")

COLOURS = {
    "plan": "#4C78A8", "launch": "#F58518", "commit": "#54A24B", "finalize": "#B279A2",
    "host stage": "#9ECAE9", "host mask_build": "#FFBF79", "host mask_upload": "#FF9DA6",
    "host stream_out": "#D6A5C9",
    "wait: expected": "#6E6E6E", "wait: accidental": "#D62728",
    "prefill": "#1F3B73", "forward": "#2F6DB5", "device stage": "#BAB0AC", "sample": "#3BA99C",
    "masked_sample": "#E3B505", "copy_back": "#9D755D", "device mask_upload": "#E377C2",
    "bubble: host_bound": "rgba(245,133,24,0.55)", "bubble: commit_wait": "rgba(148,103,189,0.60)",
    "bubble: accidental_sync": "rgba(214,39,40,0.55)", "bubble: copy_wait": "rgba(157,117,93,0.55)",
}
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

NS_PER_MS = 1e6
HEIGHT_STEPS = 64                 # aggregated heights are quantised to 1/64 of a lane's band


@dataclass(frozen=True, slots=True)
class Lane:
    name: str      # thread name or stream name
    kind: str      # host | device

    @property
    def label(self) -> str:
        return f"host · {self.name}" if self.kind == "host" else f"device · {self.name}"


@dataclass(slots=True)
class SpanSet:
    """One drawable category. ``info`` columns feed the hover template of ``group``."""
    name: str                 # trace name, also the legend entry
    group: str                # phase | subphase | wait | device | bubble
    colour: str
    lane: np.ndarray          # int32 lane index per span
    t0: np.ndarray            # int64 ns, sorted by (lane, t0)
    t1: np.ndarray
    info: np.ndarray          # float64 (n, 5): step, slot, rows, duration µs, launch delay µs (device ops)
    text: list[str] | None = None   # per-span strings (waits and bubbles only)

    def __len__(self) -> int:
        return len(self.t0)


@dataclass(slots=True)
class SyncMarkers:
    """Accidental host syncs: one marker each."""
    t0: np.ndarray
    t1: np.ndarray
    lane: np.ndarray
    step: np.ndarray
    idle_ns: np.ndarray       # device idle it caused (the accidental-sync bubbles analysis gives its site)
    site: list[str]
    reason: list[str]

    def __len__(self) -> int:
        return len(self.t0)


@dataclass(slots=True)
class TimelineData:
    lanes: list[Lane]
    sets: list[SpanSet]
    syncs: SyncMarkers
    step_ids: np.ndarray      # steps in order of their first launch
    step_t0: np.ndarray       # int64 ns: where each step begins (its launch)
    origin: int               # ns mapped to x = 0
    t_min: int
    t_max: int
    window: tuple[int, int] | None
    n_spans: int = field(default=0)

    def to_ms(self, t: np.ndarray | int) -> np.ndarray | float:
        return (np.asarray(t, dtype=np.float64) - self.origin) / NS_PER_MS

    def full_range_ms(self) -> tuple[float, float]:
        return float(self.to_ms(self.t_min)), float(self.to_ms(self.t_max))


# --------------------------------------------------------------------- prepare


def _window(report: Any) -> tuple[int, int] | None:
    w = getattr(report, "window", None) if report is not None else None
    if w is None:
        return None
    if hasattr(w, "t0"):
        return int(w.t0), int(w.t1)
    return int(w[0]), int(w[1])


def _rows_lookup(trace: Trace):
    if not trace.steps:
        return lambda steps: np.zeros(len(steps))
    ids = np.array([s.step for s in trace.steps], dtype=np.int64)
    rows = np.array([s.rows for s in trace.steps], dtype=np.float64)
    order = np.argsort(ids, kind="stable")
    ids, rows = ids[order], rows[order]

    def lookup(steps: np.ndarray) -> np.ndarray:
        if len(steps) == 0:
            return np.zeros(0)
        i = np.clip(np.searchsorted(ids, steps), 0, len(ids) - 1)
        return np.where(ids[i] == steps, rows[i], np.nan)
    return lookup


def _span_set(name: str, group: str, colour: str, lane: list[int], t0: list[int], t1: list[int],
              cols: list[list[float]], text: list[str] | None = None) -> SpanSet:
    lane_a = np.asarray(lane, dtype=np.int32)
    t0_a = np.asarray(t0, dtype=np.int64)
    t1_a = np.asarray(t1, dtype=np.int64)
    info = np.asarray(cols, dtype=np.float64).T.reshape(len(t0_a), -1) if cols else np.zeros((len(t0_a), 0))
    order = np.lexsort((t0_a, lane_a))
    return SpanSet(name, group, colour, lane_a[order], t0_a[order], t1_a[order],
                   np.ascontiguousarray(info[order]),
                   [text[i] for i in order] if text is not None else None)


def _columns(records: list, n: int) -> list[np.ndarray]:
    """Records (NamedTuples) as one array per field; strings stay object arrays."""
    if not records:
        return [np.zeros(0, dtype=np.int64) for _ in range(n)]
    return [np.asarray(c) for c in zip(*records)]


def _first_appearance(values: np.ndarray) -> list:
    if not len(values):
        return []
    uniq, first = np.unique(values, return_index=True)
    return [uniq[i] for i in np.argsort(first)]


def _wait_lanes(wait_t0: np.ndarray, phase_sets: list[SpanSet], default: int) -> np.ndarray:
    """The host thread whose phase span contains each wait's start (a wait happens inside a phase)."""
    out = np.full(len(wait_t0), -1, dtype=np.int32)
    lanes = sorted({int(x) for st in phase_sets for x in np.unique(st.lane)})
    for lane in lanes:
        t0 = np.concatenate([st.t0[st.lane == lane] for st in phase_sets])
        t1 = np.concatenate([st.t1[st.lane == lane] for st in phase_sets])
        o = np.argsort(t0, kind="stable")
        t0, t1 = t0[o], np.maximum.accumulate(t1[o])
        i = np.searchsorted(t0, wait_t0, side="right") - 1
        inside = (i >= 0) & (t1[np.maximum(i, 0)] >= wait_t0) & (out < 0)
        out[inside] = lane
    out[out < 0] = default
    return out


def prepare_timeline(trace: Trace, report: Any = None) -> TimelineData:
    """Arrays for every lane and category of ``trace``; ``report`` adds bubbles and syncs."""
    window = _window(report)
    phase, h_step, h_slot, h_t0, h_t1, h_thread = _columns(trace.host_spans, 6)
    stream, op, d_step, d_slot, d_t0, d_t1, d_enq = _columns(trace.device_spans, 7)
    threads = [str(t) for t in _first_appearance(h_thread)] or ["main"]
    present = {str(x) for x in np.unique(stream)} if len(stream) else set()
    streams = [x for x in STREAM_ORDER if x in present] + sorted(present - set(STREAM_ORDER)) or ["compute"]
    lanes = [Lane(t, "host") for t in threads] + [Lane(x, "device") for x in streams]
    thread_lane = np.zeros(len(h_thread), dtype=np.int32)
    for i, t in enumerate(threads):
        thread_lane[h_thread == t] = i
    stream_lane = np.zeros(len(stream), dtype=np.int32)
    for i, x in enumerate(streams):
        stream_lane[stream == x] = len(threads) + i
    compute_lane = len(threads) + (streams.index("compute") if "compute" in streams else 0)
    rows_of = _rows_lookup(trace)

    sets: list[SpanSet] = []
    # Host phases and sub-phases; info columns: step, slot, rows, duration (µs), spare.
    present = {str(x) for x in np.unique(phase)} if len(phase) else set()
    for ph in list(HOST_PHASES) + list(HOST_SUBPHASES) + sorted(present - set(HOST_PHASES) - set(HOST_SUBPHASES)):
        if ph not in present:
            continue
        m = np.flatnonzero(phase == ph)
        sub = ph not in HOST_PHASES
        name = f"host {ph}" if sub else ph
        steps = h_step[m].astype(np.int64)
        sets.append(_span_set(
            name, "subphase" if sub else "phase", COLOURS.get(name, "#888888"), thread_lane[m], h_t0[m], h_t1[m],
            [steps, h_slot[m], rows_of(steps), (h_t1[m] - h_t0[m]) / 1e3, np.zeros(len(m))]))

    # Device ops; the spare column is the launch delay (start - enqueued).
    op_rank = {o: i for i, o in enumerate(DEVICE_OPS)}
    pairs = sorted({(str(o), str(x)) for o in (np.unique(op) if len(op) else []) for x in np.unique(stream[op == o])},
                   key=lambda p: (op_rank.get(p[0], 99), p[1]))
    for o, x in pairs:
        m = np.flatnonzero((op == o) & (stream == x))
        name = f"device {o}" if o in ("stage", "mask_upload") else o
        if sum(1 for p in pairs if p[0] == o) > 1:
            name = f"{name} ({x})"
        steps = d_step[m].astype(np.int64)
        sets.append(_span_set(
            name, "device", COLOURS.get(name.split(" (")[0], "#888888"), stream_lane[m], d_t0[m], d_t1[m],
            [steps, d_slot[m], rows_of(steps), (d_t1[m] - d_t0[m]) / 1e3,
             np.maximum(d_t0[m] - d_enq[m], 0) / 1e3]))

    # Host waits, on the lane of the thread that was inside a phase when it waited.
    w_t0 = np.array([w.t0 for w in trace.waits], dtype=np.int64)
    wait_lane = _wait_lanes(w_t0, [st for st in sets if st.group == "phase"], 0)
    for expected, name in ((True, "wait: expected"), (False, "wait: accidental")):
        idx = [i for i, w in enumerate(trace.waits) if bool(w.expected) == expected]
        if not idx:
            continue
        ws = [trace.waits[i] for i in idx]
        steps = np.array([w.step for w in ws], dtype=np.int64)
        sets.append(_span_set(
            name, "wait", COLOURS[name], wait_lane[idx], [w.t0 for w in ws], [w.t1 for w in ws],
            [steps, np.zeros(len(ws)), rows_of(steps), [(w.t1 - w.t0) / 1e3 for w in ws], np.zeros(len(ws))],
            [f"{w.reason}<br>site: {w.site}" for w in ws]))

    # Bubbles from the analysis, shaded on the compute lane.
    bubbles = list(getattr(report, "bubbles", None) or [])
    for cause in list(BUBBLE_CAUSES) + sorted({b.cause for b in bubbles} - set(BUBBLE_CAUSES)):
        bs = [b for b in bubbles if b.cause == cause]
        if not bs:
            continue
        steps = np.array([b.step if b.step is not None else -1 for b in bs], dtype=np.int64)
        name = f"bubble: {cause}"
        sets.append(_span_set(
            name, "bubble", COLOURS.get(name, "rgba(128,128,128,0.4)"), [compute_lane] * len(bs),
            [b.t0 for b in bs], [b.t1 for b in bs],
            [steps, np.zeros(len(bs)), rows_of(steps), [(b.t1 - b.t0) / 1e3 for b in bs], np.zeros(len(bs))],
            [str(getattr(b, "detail", "") or "") for b in bs]))

    syncs = _sync_markers(trace, window, list(wait_lane), bubbles)

    # Step boundaries: where each step's launch begins (its first host span when there is no launch).
    m = np.flatnonzero(phase == "launch") if len(phase) else np.zeros(0, dtype=np.int64)
    if not len(m):
        m = np.arange(len(phase))
    step_ids = np.zeros(0, dtype=np.int64)
    step_t0 = np.zeros(0, dtype=np.int64)
    if len(m):
        o = np.lexsort((h_t0[m], h_step[m]))
        st_sorted, t0_sorted = h_step[m][o].astype(np.int64), h_t0[m][o].astype(np.int64)
        first = np.concatenate([[True], st_sorted[1:] != st_sorted[:-1]])
        step_ids, step_t0 = st_sorted[first], t0_sorted[first]
        o = np.argsort(step_t0, kind="stable")
        step_ids, step_t0 = step_ids[o], step_t0[o]

    all_t = [st.t0.min() for st in sets if len(st)] + [st.t1.max() for st in sets if len(st)]
    t_min = int(min(all_t)) if all_t else 0
    t_max = int(max(all_t)) if all_t else 1
    origin = window[0] if window else t_min
    n_spans = sum(len(st) for st in sets if st.group in ("phase", "subphase", "device", "wait"))
    return TimelineData(lanes, sets, syncs, step_ids, step_t0, origin, t_min, max(t_max, t_min + 1),
                        window, n_spans)


def _sync_markers(trace: Trace, window, wait_lane: list[int], bubbles: list) -> SyncMarkers:
    """One marker per accidental (unexpected) host wait the analysis counts in its window.

    The idle a sync caused: analysis gives each accidental-sync bubble the call
    site that caused it (``detail``); a bubble goes to the latest wait at that
    site that began before the bubble ended, so the markers' idle sums to each
    site's ``idle_ns``.
    """
    idx = [i for i, w in enumerate(trace.waits) if not w.expected
           and (window is None or (w.t0 < window[1] and w.t1 >= window[0]))]
    ws = [trace.waits[i] for i in idx]
    idle = np.zeros(len(ws), dtype=np.float64)
    by_site: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for k, w in enumerate(ws):
        by_site.setdefault(w.site, ([], []))
        by_site[w.site][0].append(w.t0)
        by_site[w.site][1].append(k)
    for site, (t0, ks) in list(by_site.items()):
        order = np.argsort(np.asarray(t0), kind="stable")
        by_site[site] = (np.asarray(t0)[order], np.asarray(ks)[order])
    caused: dict[str, list] = {}
    for b in bubbles:
        if b.cause == "accidental_sync" and b.detail in by_site:
            caused.setdefault(b.detail, []).append((b.t1, b.t1 - b.t0))
    for site, rows in caused.items():
        t0s, ks = by_site[site]
        ends, durs = np.array(rows, dtype=np.int64).T
        j = np.maximum(np.searchsorted(t0s, ends, side="right") - 1, 0)
        np.add.at(idle, ks[j], durs)
    return SyncMarkers(np.array([w.t0 for w in ws], dtype=np.int64), np.array([w.t1 for w in ws], dtype=np.int64),
                       np.array([wait_lane[i] for i in idx], dtype=np.int32),
                       np.array([w.step for w in ws], dtype=np.int64), idle,
                       [w.site for w in ws], [w.reason for w in ws])


# ------------------------------------------------------------------------ draw


@dataclass(frozen=True, slots=True)
class View:
    """What to draw: an x range in ms (None: everything) and how dense it may get."""
    x_range: tuple[float, float] | None = None
    width_px: int = 1600
    max_spans: int = 6000        # more visible spans than this: aggregate
    bucket_px: float = 3.0       # aggregated bucket width
    max_step_lines: int = 400    # step boundaries drawn only when this few are visible
    min_bubble_px: float = 3.0   # bubbles narrower than this are widened (centred) so they show


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
            meta=st.name, hovertemplate=_HOVER[st.group], name=prefix + st.name + " (hover)",
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


def x_range_from_relayout(relayout: dict | None) -> tuple[str | None, tuple[float, float] | None]:
    """What a plotly relayout event asks of the x axis: ("range", (lo, hi)), ("reset", None)
    or (None, None) when it is about something else (legend, y axis, resize)."""
    if not relayout:
        return None, None
    for ax in ("xaxis", "xaxis2"):
        if f"{ax}.range[0]" in relayout and f"{ax}.range[1]" in relayout:
            lo, hi = float(relayout[f"{ax}.range[0]"]), float(relayout[f"{ax}.range[1]"])
            return "range", (min(lo, hi), max(lo, hi))
        if isinstance(relayout.get(f"{ax}.range"), (list, tuple)) and len(relayout[f"{ax}.range"]) == 2:
            lo, hi = map(float, relayout[f"{ax}.range"])
            return "range", (min(lo, hi), max(lo, hi))
        if relayout.get(f"{ax}.autorange") is True:
            return "reset", None
    return None, None


def placeholder_figure(message: str, height: int = 260) -> go.Figure:
    """An empty figure carrying a message (no trace loaded, or it failed)."""
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=height, xaxis=dict(visible=False),
                      yaxis=dict(visible=False), margin=dict(l=20, r=20, t=20, b=20),
                      annotations=[dict(text=message, showarrow=False, x=0.5, y=0.5, xref="paper",
                                        yref="paper", font=dict(size=14, color="#666"))])
    return fig
