"""Timeline data: a trace's records as sorted numpy arrays, one ``SpanSet`` per category.

``prepare_timeline(trace, report)`` runs once per trace; drawing (``figure.py``) then
only searches these arrays, so a zoom re-draw never touches the trace again. The fields
are read as arrays (``fields.py``: from ``Columns`` without a tuple per record) and each
category is indexed per lane once (``lane_index.py``), so a draw of ten million spans
costs its pixel columns, not its spans.

Lanes are generic: one per host thread and one per device stream, named as the
trace names them (an imported trace brings its own threads and streams); the
streams this engine writes (compute, copy) come first. Bubbles are drawn on the
lane of the stream the analysis measures idle on (``analysis.window.COMPUTE``).
Every span keeps where it came from (``source``, ``index``: its position in the
trace's record list, or in the bubble list) so a selection can show the record.
"""
from __future__ import annotations

import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from photon_trace.dashboard.timeline.fields import Labels, numbers, pair_labels, text_codes
from photon_trace.dashboard.timeline.lane_index import LaneIndex
from photon_trace.dashboard.timeline.marks import RequestStates, SyncMarkers, request_states, sync_markers
from photon_trace.dashboard.timeline.palette import (
    BUBBLE_COLOURS, DEVICE_COLOURS, IMPORTED_COLOURS, OTHER_COLOUR, PHASE_COLOURS, WAIT_COLOURS)
from photon_trace.dashboard.timeline.stack import rows_per_thread, stack_depths
from photon_trace.dashboard.timeline.step_rows import rows_lookup
from photon_trace.dashboard.timeline.step_starts import step_starts
from photon_trace.telemetry.analysis.causes import Cause, cause_label
from photon_trace.telemetry.analysis.window import COMPUTE
from photon_trace.telemetry.trace.lanes import primary_stream
from photon_trace.telemetry.trace.ranks import lane_rank
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.trace.time import trace_origin_ns
from photon_trace.telemetry.tracer import SUB_PHASES, TOP_PHASES

DEVICE_OPS = ("prefill", "forward", "stage", "sample", "masked_sample", "copy_back", "mask_upload")
BUBBLE_CAUSES = tuple(Cause)
STREAM_ORDER = (COMPUTE, "copy")   # this engine's streams first; any other stream after them, by name
NS_PER_S = 1e9


def phase_set_name(phase: str, sub: bool) -> str:
    """The category of a phase's spans: a sub-phase's is "host <name>" (a device op may share its name)."""
    return f"host {phase}" if sub else phase


COLOURS = {
    **{phase_set_name(p.span_name, p.sub): c for p, c in PHASE_COLOURS.items()},
    **WAIT_COLOURS, **DEVICE_COLOURS, **IMPORTED_COLOURS,
}


def bubble_name(cause: str) -> str:
    """The legend entry of a cause's bubbles: the words every table uses for the cause."""
    return f"bubble: {cause_label(cause)}"


@dataclass(frozen=True, slots=True)
class Lane:
    name: str      # thread name or stream name
    kind: str      # host | device | requests
    depth: int = 0  # an imported host thread's call-stack row (``stack.py``)

    @property
    def label(self) -> str:
        ranked = lane_rank(self.name)      # a distributed job's lane: its rank first, as a group heading
        prefix, name = (f"rank {ranked[0]} · ", ranked[1]) if ranked else ("", self.name)
        if self.depth:                     # an imported call stack's deeper rows
            return f"{prefix}host · {name} · depth {self.depth}"
        return prefix + {"host": f"host · {name}", "device": f"device · {name}"}.get(self.kind, name)


@dataclass(slots=True)
class SpanSet:
    """One drawable category. ``info`` columns feed the hover template of ``group``."""
    name: str                 # legend entry
    group: str                # phase | subphase | wait | device | bubble
    colour: str
    lane: np.ndarray          # int32 lane index per span
    t0: np.ndarray            # int64 ns, sorted by (lane, t0)
    t1: np.ndarray
    info: np.ndarray          # float64 (n, 5): step, slot, rows, duration ns, launch delay ns (device ops)
    source: str               # host_spans | device_spans | waits | bubbles: where ``index`` points
    index: np.ndarray         # int64 position of each span in that list
    text: Labels | None = None   # per-span strings, as the trace has them (a figure shows them ``plain``)
    in_window: np.ndarray | None = None  # bubbles: inside the analysis window (counted) or not
    by_lane: LaneIndex | None = None     # built here, once: what each draw searches instead of scanning

    def __post_init__(self) -> None:
        if self.by_lane is None:
            self.by_lane = LaneIndex(self.lane, self.t0, self.t1)

    def __len__(self) -> int:
        return len(self.t0)


@dataclass(slots=True)
class TimelineData:
    lanes: list[Lane]
    sets: list[SpanSet]
    syncs: SyncMarkers
    step_ids: np.ndarray      # steps in order of their first launch
    step_t0: np.ndarray       # int64 ns: where each step begins (its launch)
    origin: int               # ns of x = 0 on the default axis: the analysis window's start
    t_min: int
    t_max: int
    window: tuple[int, int] | None
    n_spans: int = 0
    trace_origin: int = 0     # ns of the trace's first record: the Perfetto export's ts = 0
    compute_lane: int = 0
    bubbles: list = field(default_factory=list)   # the Bubble records the "bubbles" sets index
    requests: RequestStates | None = None
    wait_lane: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))   # per trace.waits record
    analysed: bool = False    # bubbles and sync links added (``with_analysis``)

    def origin_for(self, axis: str = "window") -> int:
        """x = 0 of an axis mode: the trace's first record for "trace", else the window's start."""
        return self.trace_origin if axis == "trace" else self.origin

    def to_x(self, t: np.ndarray | int, axis: str = "window") -> np.ndarray | float:
        """Seconds from the axis origin."""
        return (np.asarray(t, dtype=np.float64) - self.origin_for(axis)) / NS_PER_S

    def full_range(self, axis: str = "window") -> tuple[float, float]:
        return float(self.to_x(self.t_min, axis)), float(self.to_x(self.t_max, axis))

    def set_named(self, name: str) -> SpanSet | None:
        return next((st for st in self.sets if st.name == name), None)


# --------------------------------------------------------------------- prepare


def _window(report: Any) -> tuple[int, int] | None:
    w = getattr(report, "window", None) if report is not None else None
    if w is None:
        return None
    if hasattr(w, "t0"):
        return int(w.t0), int(w.t1)
    return int(w[0]), int(w[1])


def _span_set(name: str, group: str, colour: str, lane, t0, t1, cols: list, source: str, index,
              text: Labels | None = None, in_window=None) -> SpanSet:
    lane_a = np.asarray(lane, dtype=np.int32)
    t0_a = np.asarray(t0, dtype=np.int64)
    t1_a = np.asarray(t1, dtype=np.int64)
    order = _lane_order(lane_a, t0_a)
    # each column written into the matrix once, in (lane, start) order: no float64 copy of each
    # column first and no sorted copy of the matrix after (10M spans: 400 MB each)
    info = np.empty((len(t0_a), len(cols))) if len(t0_a) else np.zeros((0, 5))
    for k, c in enumerate(cols if len(t0_a) else ()):
        c = np.asarray(c)
        info[:, k] = c if order is None else c[order]
    if order is None:    # already in (lane, start) order, as a trace's own records usually are
        return SpanSet(name, group, colour, lane_a, t0_a, t1_a, info, source, np.asarray(index, dtype=np.int64),
                       text, np.asarray(in_window, dtype=bool) if in_window is not None else None)
    return SpanSet(name, group, colour, lane_a[order], t0_a[order], t1_a[order], info,
                   source, np.asarray(index, dtype=np.int64)[order],
                   text.take(order) if text is not None else None,
                   np.asarray(in_window, dtype=bool)[order] if in_window is not None else None)


def _lane_order(lane: np.ndarray, t0: np.ndarray) -> np.ndarray | None:
    """The stable order by (lane, start); None when the spans are in it already (a check of one
    pass instead of a sort: 10M spans are mostly recorded in that order)."""
    if len(lane) < 2:
        return None
    dl = np.diff(lane)
    if ((dl > 0) | ((dl == 0) & (np.diff(t0) >= 0))).all():
        return None
    return np.lexsort((t0, lane))


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


def _by_category(col: tuple[np.ndarray, list[str]], categories: dict | None
                 ) -> tuple[tuple[np.ndarray, list[str]], Labels | None]:
    """An imported trace's span names (``text_codes``' codes and names) mapped to their category
    (what the sets are made of), and each span's own name for the hover; our own traces' names
    pass through, with no hover text."""
    codes, names = col
    if not categories or not len(codes):
        return col, None
    cats = [categories.get(n, "other") for n in names]
    cat_names = list(dict.fromkeys(cats))
    lut = np.array([cat_names.index(c) for c in cats], dtype=np.int32)
    short = [n if len(n) <= 120 else n[:119] + "…" for n in names]
    return (lut[codes], cat_names), Labels(codes, short)


def _lanes(threads: list[str], streams: list[str], has_requests: bool, analysed: str = COMPUTE,
           rows: list[int] | None = None) -> list[Lane]:
    """Host threads (``rows`` each: an imported trace's call stack), then the analysed stream,
    this engine's streams, any other by name; requests. A distributed job's lanes come in
    groups, one per rank in rank order, each laid out so."""
    depth = dict(zip(threads, rows or [1] * len(threads)))
    ranks = sorted({r[0] for r in map(lane_rank, [*threads, *streams]) if r is not None})
    groups = [([t for t in threads if (lane_rank(t) or (None,))[0] == r],
               [x for x in streams if (lane_rank(x) or (None,))[0] == r]) for r in ranks] or [(threads, streams)]
    out: list[Lane] = []
    for ts, xs in groups:
        first = [analysed] if analysed in xs and analysed not in STREAM_ORDER else []
        ordered = first + [x for x in STREAM_ORDER if x in xs] + sorted(set(xs) - set(STREAM_ORDER) - set(first),
                                                                        key=_natural)
        out += [Lane(t, "host", d) for t in ts for d in range(depth[t])] + [Lane(x, "device") for x in ordered]
    return out + ([Lane("requests", "requests")] if has_requests else [])


def prepare_timeline(trace: Trace, report: Any = None, outside_bubbles: list | None = None) -> TimelineData:
    """Arrays for every lane and category of ``trace``; ``report`` adds bubbles and syncs,
    ``outside_bubbles`` the bubbles before and after its window (drawn, not counted)."""
    spans = prepare_spans(trace, _window(report))
    return with_analysis(spans, trace, report, outside_bubbles) if report is not None else spans


def prepare_spans(trace: Trace, window: tuple[int, int] | None) -> TimelineData:
    """Every lane and span of ``trace``, and its sync markers, before any analysis but the
    window: what the page can draw while the analysis is still running."""
    if not trace.requests:
        return _prepare(trace, window, None)
    with ThreadPoolExecutor(1, thread_name_prefix="photon-trace-requests") as pool:
        # the requests lane's states need nothing of the spans and are mostly numpy sorts, which
        # let go of the GIL: on the second core beside the span sets (0.7 s of 3-4 at 10M spans)
        return _prepare(trace, window, pool.submit(request_states, trace.requests, -1))


def _prepare(trace: Trace, window: tuple[int, int] | None, states: Future | None) -> TimelineData:
    hs, ds = trace.host_spans, trace.device_spans
    phase, thread = text_codes(hs, "phase"), text_codes(hs, "thread")
    h_step, h_slot, h_t0, h_t1 = (numbers(hs, k) for k in ("step", "slot", "t0", "t1"))
    stream, op = text_codes(ds, "stream"), text_codes(ds, "op")
    d_step, d_slot, d_t0, d_t1, d_enq = (numbers(ds, k) for k in ("step", "slot", "t0", "t1", "enqueued"))
    threads = thread[1] or ["main"]
    streams = stream[1] or [COMPUTE]
    analysed = primary_stream(trace)
    categories = trace.header.get("categories") or {}
    # an imported trace's host events nest: a row per call-stack depth; ours are the tick's phases
    depth = stack_depths(thread[0], h_t0, h_t1) if categories.get("host") else np.zeros(len(h_t0), np.int32)
    lanes = _lanes(threads, streams, bool(trace.requests), analysed, rows_per_thread(thread[0], depth, len(threads)))
    lane_of = {(ln.kind, ln.name): i for i, ln in enumerate(lanes) if not ln.depth}
    thread_lane = np.array([lane_of[("host", t)] for t in threads], dtype=np.int32)[thread[0]] + depth \
        if len(thread[0]) else np.zeros(0, np.int32)
    stream_lane = np.array([lane_of[("device", x)] for x in streams], dtype=np.int32)[stream[0]] \
        if len(stream[0]) else np.zeros(0, np.int32)
    compute_lane = lane_of.get(("device", analysed), len(threads))
    rows_of = rows_lookup(trace)
    named_phase, phase_text = _by_category(phase, categories.get("host"))
    named_op, op_text = _by_category(op, categories.get("device"))

    sets: list[SpanSet] = []
    # Host phases and sub-phases; info columns: step, slot, rows, duration, spare.
    names = named_phase[1]
    order = [p for p in TOP_PHASES + SUB_PHASES if p in names] + sorted(
        set(names) - set(TOP_PHASES) - set(SUB_PHASES))
    for ph in order:
        m = np.flatnonzero(named_phase[0] == names.index(ph))
        if phase_text is None:
            sub = ph in SUB_PHASES      # no_work is a full-height span of its own, as a phase is
            name = phase_set_name(ph, sub)
        else:   # an imported trace's category: each span in its own call-stack row, a full one
            sub, name = False, ph
        steps = h_step[m]
        sets.append(_span_set(
            name, "subphase" if sub else "phase", COLOURS.get(name, OTHER_COLOUR), thread_lane[m], h_t0[m], h_t1[m],
            [steps, h_slot[m], rows_of(steps), h_t1[m] - h_t0[m], np.zeros(len(m))], "host_spans", m,
            phase_text.take(m) if phase_text is not None else None))

    # Device ops; the spare column is the launch delay (start - enqueued).
    op_rank = {o: i for i, o in enumerate(DEVICE_OPS)}
    if op_text is None:
        present = np.unique(op[0].astype(np.int64) * max(len(stream[1]), 1) + stream[0])
        pairs = sorted({(op[1][c // len(stream[1])], stream[1][c % len(stream[1])]) for c in present.tolist()},
                       key=lambda p: (op_rank.get(p[0], 99), p[0], p[1]))
    else:   # an imported trace's categories: one set each, across its streams
        pairs = [(c, None) for c in named_op[1]]
    for o, x in pairs:
        m = (np.flatnonzero((op[0] == op[1].index(o)) & (stream[0] == stream[1].index(x))) if x is not None
             else np.flatnonzero(named_op[0] == named_op[1].index(o)))
        name = f"device {o}" if o in ("stage", "mask_upload") else o
        if sum(1 for p in pairs if p[0] == o) > 1:
            name = f"{name} ({x})"
        steps = d_step[m]
        sets.append(_span_set(
            name, "device", COLOURS.get(name.split(" (")[0], OTHER_COLOUR), stream_lane[m], d_t0[m], d_t1[m],
            [steps, d_slot[m], rows_of(steps), d_t1[m] - d_t0[m], np.maximum(d_t0[m] - d_enq[m], 0)],
            "device_spans", m, op_text.take(m) if op_text is not None else None))

    # Host waits, on the lane of the thread that was inside a phase when it waited.
    waits = trace.waits
    w_t0, w_t1, w_step = (numbers(waits, k) for k in ("t0", "t1", "step"))
    w_exp = numbers(waits, "expected").astype(bool)
    w_text = pair_labels(text_codes(waits, "reason"), text_codes(waits, "site"), "{a}\nsite: {b}")
    wait_lane = _wait_lanes(w_t0, [st for st in sets if st.group == "phase"], 0)
    for expected, name in ((True, "wait: expected"), (False, "wait: accidental")):
        idx = np.flatnonzero(w_exp == expected)
        if not len(idx):
            continue
        steps = w_step[idx]
        sets.append(_span_set(
            name, "wait", COLOURS[name], wait_lane[idx], w_t0[idx], w_t1[idx],
            [steps, np.zeros(len(idx)), rows_of(steps), w_t1[idx] - w_t0[idx], np.zeros(len(idx))],
            "waits", idx, w_text.take(idx)))

    syncs = sync_markers(trace, window, wait_lane, [], compute_lane)
    step_ids, step_t0 = step_starts(phase, h_step, h_t0)
    t_lo = [int(st.t0.min()) for st in sets if len(st)]
    t_hi = [int(st.t1.max()) for st in sets if len(st)]
    t_min = min(t_lo) if t_lo else 0
    t_max = max(t_hi) if t_hi else 1
    n_spans = sum(len(st) for st in sets if st.group in ("phase", "subphase", "device", "wait"))
    requests = replace(states.result(), lane=lane_of.get(("requests", "requests"), -1)) if states else None
    return TimelineData(lanes, sets, syncs, step_ids, step_t0, window[0] if window else t_min, t_min,
                        max(t_max, t_min + 1), window, n_spans, trace_origin_ns(trace), compute_lane,
                        [], requests, wait_lane)


def with_analysis(data: TimelineData, trace: Trace, report: Any, outside_bubbles: list | None = None) -> TimelineData:
    """``data`` with the analysis' bubbles (and those outside its window) on the compute lane,
    and each sync marker linked to the bubbles it caused. The span arrays are shared."""
    window = _window(report) or data.window
    rows_of = rows_lookup(trace)
    compute_lane = data.compute_lane
    counted = list(getattr(report, "bubbles", None) or [])
    bubbles = counted + list(outside_bubbles or [])
    sets = [st for st in data.sets if st.group != "bubble"]
    n = len(bubbles)
    # each field in one pass over the records (millions of bubbles at ten million spans)
    cause_code: dict[Any, int] = {}
    codes = np.fromiter((cause_code.setdefault(b.cause, len(cause_code)) for b in bubbles), np.int32, n)
    t0 = np.fromiter((b.t0 for b in bubbles), np.int64, n)
    t1 = np.fromiter((b.t1 for b in bubbles), np.int64, n)
    steps = np.fromiter((b.step if b.step is not None else -1 for b in bubbles), np.int64, n)
    texts = Labels.of([_bubble_text(b) for b in bubbles])
    rows = rows_of(steps)
    for cause in BUBBLE_CAUSES + tuple(sorted(set(cause_code) - set(BUBBLE_CAUSES))):
        if cause not in cause_code:
            continue
        idx = np.flatnonzero(codes == cause_code[cause])
        k = len(idx)
        sets.append(_span_set(
            bubble_name(cause), "bubble", BUBBLE_COLOURS.get(cause, OTHER_COLOUR), np.full(k, compute_lane, np.int32),
            t0[idx], t1[idx], [steps[idx], np.zeros(k), rows[idx], t1[idx] - t0[idx], np.zeros(k)],
            "bubbles", idx, texts.take(idx), idx < len(counted)))
    syncs = sync_markers(trace, window, data.wait_lane, bubbles, compute_lane)
    origin = window[0] if window else data.origin
    return TimelineData(data.lanes, sets, syncs, data.step_ids, data.step_t0, origin, data.t_min, data.t_max,
                        window, data.n_spans, data.trace_origin, compute_lane, bubbles, data.requests,
                        data.wait_lane, analysed=True)


def _bubble_text(b: Any) -> str:
    """A bubble's detail, and how much of it another stream was busy (the device was not idle then)."""
    text = str(getattr(b, "detail", "") or "")
    covered = getattr(b, "covered_ns", 0)
    if covered:
        text += f"\n{covered / 1e3:,.1f} µs of it covered by {b.covered_by}"
    return text
