"""Timeline data: a trace's records as sorted numpy arrays, one ``SpanSet`` per category.

``prepare_timeline(trace, report)`` runs once per trace; drawing (``timeline.py``) then
only slices these arrays, so a zoom re-draw never touches the trace again.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from photon_trace.telemetry.records import Trace

HOST_PHASES = ("plan", "launch", "commit", "finalize")
HOST_SUBPHASES = ("stage", "mask_build", "mask_upload", "stream_out")
DEVICE_OPS = ("prefill", "forward", "stage", "sample", "masked_sample", "copy_back", "mask_upload")
BUBBLE_CAUSES = ("host_bound", "commit_wait", "accidental_sync", "copy_wait", "stream_wait", "dispatch")
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
    "bubble: dispatch": "rgba(127,127,127,0.45)", "bubble: stream_wait": "rgba(23,190,207,0.55)",
    # Imported (PyTorch profiler) traces: their hundreds of op names are drawn by category.
    "cpu op": "#4C78A8", "annotation": "#C7C7C7", "python": "#BCBD22", "cuda runtime": "#F58518",
    "cuda driver": "#FF9D45", "kernel": "#2F6DB5", "memcpy": "#9D755D", "memset": "#BAB0AC",
}
CATEGORY_GROUP = {"cpu op": "phase"}
"""An imported trace's host categories draw as sub-phases (the lane's lower half, on top),
except its cpu ops, which take the full lane as our phases do."""

NS_PER_MS = 1e6


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


def _natural(name: str) -> list:
    """Sort key that puts ``stream 7`` before ``stream 23``."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _by_category(names: np.ndarray, categories: dict | None) -> tuple[np.ndarray, list[str] | None]:
    """An imported trace's span names mapped to their category (what the sets are made of), and
    the names themselves for the hover; our own traces' names pass through, with no hover text."""
    if not categories or not len(names):
        return names, None
    uniq, inv = np.unique(names, return_inverse=True)
    cats = np.array([categories.get(str(n), "other") for n in uniq], dtype=object)
    short = [str(n) if len(str(n)) <= 120 else str(n)[:119] + "…" for n in uniq]
    return cats[inv], [short[i] for i in inv]


def prepare_timeline(trace: Trace, report: Any = None) -> TimelineData:
    """Arrays for every lane and category of ``trace``; ``report`` adds bubbles and syncs."""
    window = _window(report)
    phase, h_step, h_slot, h_t0, h_t1, h_thread = _columns(trace.host_spans, 6)
    stream, op, d_step, d_slot, d_t0, d_t1, d_enq = _columns(trace.device_spans, 7)
    categories = trace.header.get("categories") or {}
    phase, phase_text = _by_category(phase, categories.get("host"))
    op, op_text = _by_category(op, categories.get("device"))
    threads = [str(t) for t in _first_appearance(h_thread)] or ["main"]
    present = {str(x) for x in np.unique(stream)} if len(stream) else set()
    analysed = getattr(report, "stream", None) or "compute"
    rest = sorted(present - set(STREAM_ORDER) - {analysed}, key=_natural)
    streams = ([analysed] if analysed in present and analysed not in STREAM_ORDER else []) + \
        [x for x in STREAM_ORDER if x in present] + rest or ["compute"]
    lanes = [Lane(t, "host") for t in threads] + [Lane(x, "device") for x in streams]
    thread_lane = np.zeros(len(h_thread), dtype=np.int32)
    for i, t in enumerate(threads):
        thread_lane[h_thread == t] = i
    stream_lane = np.zeros(len(stream), dtype=np.int32)
    for i, x in enumerate(streams):
        stream_lane[stream == x] = len(threads) + i
    compute_lane = len(threads) + (streams.index(analysed) if analysed in streams else 0)
    rows_of = _rows_lookup(trace)

    sets: list[SpanSet] = []
    # Host phases and sub-phases; info columns: step, slot, rows, duration (µs), spare.
    present = {str(x) for x in np.unique(phase)} if len(phase) else set()
    for ph in list(HOST_PHASES) + list(HOST_SUBPHASES) + sorted(present - set(HOST_PHASES) - set(HOST_SUBPHASES)):
        if ph not in present:
            continue
        m = np.flatnonzero(phase == ph)
        if phase_text is None:
            sub = ph not in HOST_PHASES
            name = f"host {ph}" if sub else ph
        else:
            sub, name = CATEGORY_GROUP.get(ph) != "phase", ph
        steps = h_step[m].astype(np.int64)
        sets.append(_span_set(
            name, "subphase" if sub else "phase", COLOURS.get(name, "#888888"), thread_lane[m], h_t0[m], h_t1[m],
            [steps, h_slot[m], rows_of(steps), (h_t1[m] - h_t0[m]) / 1e3, np.zeros(len(m))],
            [phase_text[i] for i in m] if phase_text is not None else None))

    # Device ops; the spare column is the launch delay (start - enqueued).
    op_rank = {o: i for i, o in enumerate(DEVICE_OPS)}
    if op_text is None:
        pairs = sorted({(str(o), str(x)) for o in (np.unique(op) if len(op) else []) for x in np.unique(stream[op == o])},
                       key=lambda p: (op_rank.get(p[0], 99), p[1]))
    else:  # an imported trace's categories: one set each, across its streams
        pairs = [(str(o), None) for o in (np.unique(op) if len(op) else [])]
    for o, x in pairs:
        m = np.flatnonzero((op == o) & (stream == x)) if x is not None else np.flatnonzero(op == o)
        name = f"device {o}" if o in ("stage", "mask_upload") else o
        if sum(1 for p in pairs if p[0] == o) > 1:
            name = f"{name} ({x})"
        steps = d_step[m].astype(np.int64)
        sets.append(_span_set(
            name, "device", COLOURS.get(name.split(" (")[0], "#888888"), stream_lane[m], d_t0[m], d_t1[m],
            [steps, d_slot[m], rows_of(steps), (d_t1[m] - d_t0[m]) / 1e3,
             np.maximum(d_t0[m] - d_enq[m], 0) / 1e3],
            [op_text[i] for i in m] if op_text is not None else None))

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
            [_bubble_text(b) for b in bs]))

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


def _bubble_text(b: Any) -> str:
    """A bubble's detail, and how much of it another stream was busy (the device was not idle then)."""
    text = str(getattr(b, "detail", "") or "")
    covered = getattr(b, "covered_ns", 0)
    if covered:
        text += f"<br>{covered / 1e3:,.1f} µs of it covered by {b.covered_by}"
    return text


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
