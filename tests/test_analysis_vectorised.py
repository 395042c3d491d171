"""The analysis's array passes equal the plain Python loops they replaced, on random small traces.

Issue 31 rewrote the hot passes (gap finding, busy runs, the host-cover timeline and its chain
sums, the launch-latency samples, per-step sums, a step's other-stream ops, the no-work cut)
as numpy over columns. The loops they replaced are kept here, verbatim in substance, as the
reference: hypothesis draws small traces with overlapping ops and spans, ties, zero-length
records, waits with and without counters, no-work spans, several streams, and each pass must
give exactly what its loop gives, for the records held as a list and as ``Columns``.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from statistics import median

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from photon_trace.telemetry.analysis._index import IntervalIndex, overlap
from photon_trace.telemetry.analysis.attribution import Attribution
from photon_trace.telemetry.analysis.bubbles import busy_intervals, device_gaps
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.gaps import Gap
from photon_trace.telemetry.analysis.host_running import PhaseCounters, landings, of_wait
from photon_trace.telemetry.analysis.host_running import split as split_running
from photon_trace.telemetry.analysis import host_timeline as timeline
from photon_trace.telemetry.analysis.host_timeline import _FEW as FEW
from photon_trace.telemetry.analysis.host_timeline import OUTSIDE, _range_min, outside_detail
from photon_trace.telemetry.analysis.no_work import NoWork
from photon_trace.telemetry.analysis.step_ops import StepOps
from photon_trace.telemetry.analysis.steps import SAMPLE_OPS, _waited_in_phases, step_periods, step_stats
from photon_trace.telemetry.analysis.window import compute_extent, step_starts
from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.lanes import host_phases, primary_stream
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, StepRecord, Trace
from photon_trace.telemetry.tracer import NO_WORK, SUB_PHASES

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GRID = 5          # times on a coarse grid: ties between starts, ends and enqueues are common
T = st.integers(0, 80).map(lambda t: t * GRID)


def length(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi).map(lambda t: t * GRID)

STREAMS = ("compute", "compute", "compute", "copy", "nccl")
OPS = ("forward", "sample", "prefill", "copy_back", "mask_upload")
PHASES = ("plan", "launch", "commit", "finalize", "stage", "other", NO_WORK)


@st.composite
def traces(draw) -> Trace:
    steps = draw(st.integers(1, 5))
    device = []
    for _ in range(draw(st.integers(0, 14))):
        t0, n = draw(T), draw(length(0, 12))
        device.append(DeviceSpan(draw(st.sampled_from(STREAMS)), draw(st.sampled_from(OPS)),
                                 draw(st.integers(0, steps - 1)), 0, t0, t0 + n,
                                 t0 + draw(length(-16, 4))))
    if device:      # some ops enqueued just as another ended: the edge between "queued" and "late"
        device = [d._replace(enqueued=device[draw(st.integers(0, len(device) - 1))].t1) if draw(st.booleans()) else d
                  for d in device]
    host = []
    for _ in range(draw(st.integers(0, 14))):
        t0, n = draw(T), draw(length(-2, 24))      # a few end before they start: no overlap
        counted = draw(st.booleans())
        host.append(HostSpan(draw(st.sampled_from(PHASES)), draw(st.integers(0, steps - 1)), 0, t0, t0 + n,
                             "main", draw(st.integers(0, max(0, n))) if counted else -1,
                             draw(st.integers(-1, 30)) if counted else -1))
    waits = []
    for _ in range(draw(st.integers(0, 4))):
        t0, n = draw(T), draw(length(-2, 16))
        counted = draw(st.booleans())
        waits.append(HostWait("wait", draw(st.booleans()), t0, t0 + n, draw(st.sampled_from(("a.py:1", "b.py:2"))),
                              draw(st.integers(0, steps - 1)), draw(st.integers(0, max(0, n))) if counted else -1,
                              draw(st.integers(-1, 20)) if counted else -1))
    header = {"version": 2, "clock": {"device_error_ns": draw(st.integers(0, 5))}}
    if draw(st.booleans()):
        header["device"] = {"concurrent_streams": False}
    if draw(st.booleans()):
        header["graph_replays"] = 1
    return Trace(header, host, device, waits, [StepRecord(s, "decode", 0, 1, 0, 0, 1) for s in range(steps)], [])


def as_columns(trace: Trace) -> Trace:
    return Trace(trace.header, Columns.from_records(HostSpan, trace.host_spans),
                 Columns.from_records(DeviceSpan, trace.device_spans), trace.waits, trace.steps, trace.requests)


def both(trace: Trace) -> list[Trace]:
    return [trace, as_columns(trace)]


windows = st.tuples(st.integers(-10, 300), st.integers(0, 500)).map(lambda w: (w[0], w[0] + w[1]))


# -- the loops the passes replaced ------------------------------------------------------------
def ref_compute_ops(trace: Trace) -> list[DeviceSpan]:
    stream = primary_stream(trace)
    return sorted((d for d in trace.device_spans if d.stream == stream), key=lambda d: (d.t0, d.t1))


def ref_busy(trace: Trace, window) -> list[tuple[int, int]]:
    w0, w1 = window
    runs: list[tuple[int, int]] = []
    for d in ref_compute_ops(trace):
        a, b = max(d.t0, w0), min(d.t1, w1)
        if a >= b:
            continue
        if runs and a <= runs[-1][1]:
            if b > runs[-1][1]:
                runs[-1] = (runs[-1][0], b)
        else:
            runs.append((a, b))
    return runs


def ref_gaps(trace: Trace, window) -> list[Gap]:
    w0, w1 = window
    gaps, last = [], None
    for d in ref_compute_ops(trace):
        if last is not None and d.t0 > last.t1:
            a, b = max(last.t1, w0), min(d.t0, w1)
            if a < b:
                gaps.append(Gap(a, b, last, d, d.t0 - last.t1))
        if last is None or d.t1 > last.t1:
            last = d
    return gaps


def ref_timeline(trace: Trace, slack: int):
    """The sweep over cover edges with the active covers in a list (attribution's ``_timeline``)."""
    waits = [w for w in trace.waits if w.t1 > w.t0]
    landed = landings(trace)
    covers = [(w.t0, w.t1, (1 if w.expected else 0, -w.t0),
               (Cause.COMMIT_WAIT if w.expected else Cause.ACCIDENTAL_SYNC, w.site, of_wait(w, landed, slack)))
              for w in waits]
    phases, own, no_work = host_phases(trace), PhaseCounters(waits), NoWork(trace)
    for h in trace.host_spans:
        if h.phase == NO_WORK and no_work:
            continue
        if h.phase in phases:
            covers.append((h.t0, h.t1, (2, -h.t0), (Cause.HOST_BOUND, h.phase, own.of(h))))
        elif h.phase not in SUB_PHASES and h.t1 > h.t0:
            # a span with the thread's counters (the server loop's ``serve``) is split by them too
            counted = own.of(h) if h.cpu_ns >= 0 else None
            covers.append((h.t0, h.t1, (3, -h.t0), (Cause.HOST_BOUND, outside_detail(h.phase), counted)))
    covers = sorted(covers, key=lambda c: c[0])
    cuts = sorted({t for c in covers for t in (c[0], c[1])})
    labels, active, j = [], [], 0
    for x in cuts:
        active = [c for c in active if c[1] > x]
        while j < len(covers) and covers[j][0] <= x:
            if covers[j][1] > x:
                active.append(covers[j])
            j += 1
        best = min(active, key=lambda c: c[2]) if active else None
        labels.append(best[3] if best else None)
    return cuts, labels


def ref_coverage(cuts, labels, a: int, b: int) -> list[tuple]:
    i = bisect_right(cuts, a)
    stretches: list[list] = []
    while a < b:
        end = min(cuts[i], b) if i < len(cuts) else b
        label = (labels[i - 1] if i > 0 else None) or OUTSIDE
        if stretches and stretches[-1][2] == label:
            stretches[-1][1] = end
        else:
            stretches.append([a, end, label])
        a, i = end, i + 1
    return [s for x, y, label in stretches for s in split_running(x, y, *label)]


def ref_launch_samples(att: Attribution, trace: Trace, gaps: list[Gap]):
    copies = defaultdict(list)
    for d in trace.device_spans:
        if d.stream != primary_stream(trace):
            copies[d.step].append(d)

    def waited(e, g1, nxt):
        return any(e < c.t1 <= g1 + att.slack and c.t1 > nxt.enqueued for c in copies.get(nxt.step, ()))

    queued, started = {True: [], False: []}, []
    for g in gaps:
        if att.one_launch(g.prev, g.next):
            continue
        first = g.next.step != g.prev.step
        if g.next.enqueued <= g.prev.t1:
            if not waited(g.prev.t1, g.next.t0, g.next):
                queued[first].append(g.full_ns - att.tail(g.prev, g.next))
        elif (first and g.next.enqueued < g.next.t0 and g.full_ns <= g.prev.t1 - g.prev.t0
              and not waited(g.next.enqueued, g.next.t0, g.next)):
            started.append(g.next.t0 - g.next.enqueued)
    return queued, started


def ref_step_starts(trace: Trace):
    stream, first = primary_stream(trace), {}
    for d in trace.device_spans:
        if d.stream == stream and (d.step not in first or d.t0 < first[d.step]):
            first[d.step] = d.t0
    return sorted((t0, step) for step, t0 in first.items())


def ref_step_rows(trace: Trace, window, gaps: list[Gap]) -> list[tuple]:
    w0, w1 = window
    fwd, smp, cpy = defaultdict(int), defaultdict(int), defaultdict(int)
    stream = primary_stream(trace)
    for d in trace.device_spans:
        if d.stream != stream:
            cpy[d.step] += d.t1 - d.t0
        elif d.op in SAMPLE_OPS:
            smp[d.step] += d.t1 - d.t0
        else:
            fwd[d.step] += d.t1 - d.t0
    phases = defaultdict(list)
    for h in trace.host_spans:
        if h.phase in host_phases(trace):
            phases[h.step].append(h)
    book = {s: sum(h.t1 - h.t0 for h in hs) for s, hs in phases.items()}
    for w in trace.waits:
        for h in phases.get(w.step, ()):
            book[w.step] -= overlap(w.t0, w.t1, h.t0, h.t1)
    starts = ref_step_starts(trace)
    last_end = {}
    for d in trace.device_spans:
        if d.stream == stream:
            last_end[d.step] = max(last_end.get(d.step, d.t1), d.t1)
    index, rows = IntervalIndex(gaps), []
    for i, (t0, step) in enumerate(starts):
        period = (starts[i + 1][0] if i + 1 < len(starts) else last_end[step]) - t0
        if not w0 <= t0 < w1:
            continue
        idle = sum(overlap(g.t0, g.t1, t0, t0 + period) for g in index.overlapping(t0, t0 + period))
        rows.append((step, fwd[step], smp[step], period, max(0, book.get(step, 0)), idle, cpy[step]))
    return rows


# -- the properties ------------------------------------------------------------------------------
@SETTINGS
@given(traces(), windows)
def test_busy_runs_and_gaps_equal_the_loops(trace, window):
    for tr in both(trace):
        assert list(busy_intervals(tr, window)) == ref_busy(trace, window)
        assert list(device_gaps(tr, window)) == ref_gaps(trace, window)
        assert step_starts(tr) == ref_step_starts(trace)
        ops = [d for d in trace.device_spans if d.stream == "compute"]
        assert compute_extent(tr) == ((min(d.t0 for d in ops), max(d.t1 for d in ops)) if ops else (0, 0))


@SETTINGS
@given(traces(), st.lists(st.tuples(st.integers(-4, 100).map(lambda t: t * GRID), length(0, 60)), max_size=6))
def test_the_host_timeline_labels_every_stretch_as_the_sweep_did(trace, ranges):
    slack = trace.header["clock"]["device_error_ns"]
    cuts, labels = ref_timeline(trace, slack)
    for tr in both(trace):
        att = Attribution(tr, slack, 20)
        for a, length in ranges:
            b = a + length
            want = ref_coverage(cuts, labels, a, b)
            assert [tuple(p) for p in att._coverage(a, b)] == want
            # the chain's sums and the stretches past g0, summed as arrays where they can be
            g0 = a + length // 2 // GRID * GRID     # on the grid: a stretch may end right at it
            cut = NoWork(trace).cut([p for p in att._coverage(a, b)])
            ref_chain: dict = defaultdict(int)
            for p in cut:
                ref_chain[p[2:]] += p.t1 - p.t0
            for few in (0, 10**9):      # the arrays' path and the small ranges' Python path
                timeline._FEW = few
                try:
                    after, chain = att._covered(a, g0, b)
                finally:
                    timeline._FEW = FEW
                assert list(chain.items()) == list(ref_chain.items())
                assert [tuple(p) for p in after] == [tuple(p) for p in cut if p.t1 > g0]


# a step's first op enqueued just as the op before it ended: queued, not a late start
EDGE = Trace({"version": 2, "clock": {"device_error_ns": 0}}, [], [DeviceSpan("compute", "forward", 0, 0, 0, 50, 0),
                                             DeviceSpan("compute", "forward", 1, 0, 60, 70, 50)],
             [], [StepRecord(s, "decode", 0, 1, 0, 0, 1) for s in (0, 1)], [])


@SETTINGS
@given(traces(), windows, st.integers(0, 40))
@example(EDGE, (0, 100), 0)
def test_launch_latency_samples_equal_the_loop(trace, window, min_gap):
    slack = trace.header["clock"]["device_error_ns"]
    want = ref_launch_samples(Attribution(trace, slack, min_gap), trace, ref_gaps(trace, window))
    for tr in both(trace):
        att = Attribution(tr, slack, min_gap)
        queued, started = att._samples(device_gaps(tr, window))
        assert (sorted(queued[True]), sorted(queued[False]), sorted(started)) == \
            (sorted(want[0][True]), sorted(want[0][False]), sorted(want[1]))
        # and where the host was ahead again, as the loop over the compute ops found it
        ahead, seen, busy_until = [], set(), None
        for d in ref_compute_ops(trace):
            if d.step not in seen and busy_until is not None and busy_until - d.enqueued >= min_gap:
                ahead.append((d.t0, d.enqueued))
            seen.add(d.step)
            busy_until = d.t1 if busy_until is None else max(busy_until, d.t1)
        assert att.ahead == ahead


@SETTINGS
@given(traces(), st.lists(st.tuples(st.integers(-1, 6), st.integers(-20, 500), st.integers(-20, 500)), max_size=8))
def test_a_steps_other_stream_ops_are_found_as_the_lists_found_them(trace, queries):
    for tr in both(trace):
        ops = StepOps(tr, "compute")
        others = [d for d in trace.device_spans if d.stream != "compute"]
        # and around each op's own end: just before, at, after, from far below
        queries = queries + [(d.step, d.t1 + a, d.t1 + b) for d in others for a, b in ((-1, 0), (0, 1), (-999, 0))]
        for step, lo, hi in queries:
            want = [d for d in others if d.step == step and lo < d.t1 <= hi]
            assert ops.ending_in(step, lo, hi) == want
            assert ops.ends_in(step, lo, hi) == bool(want)
            assert ops.latest_ending(step, lo, hi) == (max(want, key=lambda d: d.t1) if want else None)
            assert ops.get(step) == ([d for d in others if d.step == step] or ())
        # the device's tail after each gap: where its own work on other streams ended (``_tail``)
        gaps = ref_gaps(trace, (0, 10**6))
        want_tail = [max([c.t1 for c in others if c.step in {g.prev.step, g.next.step}
                          and c.enqueued <= g.prev.t1 < c.t1 <= g.next.t0], default=g.prev.t1) for g in gaps]
        g0 = np.array([g.prev.t1 for g in gaps], dtype=np.int64)
        g1 = np.array([g.next.t0 for g in gaps], dtype=np.int64)
        pairs = (np.array([g.prev.step for g in gaps], dtype=np.int64), np.array([g.next.step for g in gaps], dtype=np.int64))
        assert ops.tail_ends(pairs, g0, g1).tolist() == want_tail
        steps = np.array([q[0] for q in queries], dtype=np.int64)
        lo = np.array([q[1] for q in queries], dtype=np.int64)
        hi = np.array([q[2] for q in queries], dtype=np.int64)
        assert ops.any_end_in(steps, lo, hi).tolist() == [ops.ends_in(*q) for q in queries]


@SETTINGS
@given(traces(), windows)
def test_step_rows_and_periods_equal_the_loops(trace, window):
    gaps = ref_gaps(trace, window)
    for tr in both(trace):
        rows = step_stats(tr, window, device_gaps(tr, window))
        assert [(r.step, r.forward_ns, r.sample_ns, r.period_ns, r.bookkeeping_ns, r.idle_ns, r.copy_ns)
                for r in rows] == ref_step_rows(trace, window, gaps)
        assert [p[0] for p in step_periods(tr)] == [s for _, s in ref_step_starts(trace)]
    # each step's waits inside its phases, before the bookkeeping is clamped at 0
    top = [h for h in trace.host_spans if h.phase in host_phases(trace)]
    want = {w.step: 0 for w in trace.waits if any(h.step == w.step for h in top)}
    for w in trace.waits:
        for h in top:
            if h.step == w.step:
                want[w.step] += overlap(w.t0, w.t1, h.t0, h.t1)
    arrays = [np.array([getattr(h, f) for h in top], dtype=np.int64) for f in ("step", "t0", "t1")]
    got = _waited_in_phases(*arrays, trace.waits)
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}


@SETTINGS
@given(traces(), windows)
def test_no_work_is_cut_out_of_gap_arrays_as_out_of_gap_records(trace, window):
    for tr in both(trace):
        no_work = NoWork(tr)
        assert list(no_work.cut(device_gaps(tr, window))) == no_work.cut(ref_gaps(trace, window))


@SETTINGS
@given(st.integers(1, 40), st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 99)),
                                    max_size=30))
def test_the_segment_tree_gives_each_point_its_least_covering_value(k, ranges):
    lo = np.array([min(r[0], k) for r in ranges], dtype=np.int64)
    hi = np.array([min(r[1], k) for r in ranges], dtype=np.int64)
    value = np.array([r[2] for r in ranges], dtype=np.int64)
    got = _range_min(k, lo, hi, value, 100) if ranges else np.full(k, 100)
    want = [min([v for a, b, v in zip(lo, hi, value) if a <= x < b], default=100) for x in range(k)]
    assert got.tolist() == want
