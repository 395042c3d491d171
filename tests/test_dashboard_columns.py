"""The timeline at the size of real profiles: a trace held as ``Columns`` is drawn from its
arrays (never a tuple per record) exactly as the same records in lists are, and each draw
asks the per-lane index (``lane_index.py``) what a pass over every span would answer."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from photon_trace.dashboard.timeline.data import SpanSet, prepare_timeline
from photon_trace.dashboard.timeline.figure import timeline_figure
from photon_trace.dashboard.timeline.lane_index import LaneIndex
from photon_trace.dashboard.timeline.overview import overview_figure
from photon_trace.dashboard.timeline.view import View
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.importers import load_any
from helpers.columns_trace import as_columns, tiled_trace
from helpers.dashboard_samples import report, sample


def no_tuples(monkeypatch) -> None:
    """Reading a record of a ``Columns`` as a tuple fails the test: the timeline must use its arrays."""
    def refuse(*_):
        raise AssertionError("the timeline built a record tuple from Columns")
    slicing = Columns.__getitem__
    monkeypatch.setattr(Columns, "__iter__", refuse)
    monkeypatch.setattr(Columns, "__getitem__", lambda self, i: slicing(self, i) if isinstance(i, slice) else refuse())


@pytest.fixture(name="no_tuples")
def no_tuples_fixture(monkeypatch):
    no_tuples(monkeypatch)


def same_figures(a, b) -> None:
    assert [t.name for t in a.data] == [t.name for t in b.data]
    for ta, tb in zip(a.data, b.data):
        for key in ("x", "y", "customdata"):
            va, vb = getattr(ta, key, None), getattr(tb, key, None)
            assert (va is None) == (vb is None), (ta.name, key)
            if va is not None:
                np.testing.assert_array_equal(np.asarray(va, dtype=np.float64), np.asarray(vb, dtype=np.float64),
                                              err_msg=f"{ta.name} {key}")
        assert (list(ta.text) if ta.text is not None else None) == (list(tb.text) if tb.text is not None else None)
    assert a.layout.meta == b.layout.meta


def test_a_trace_held_as_columns_draws_as_its_records_do_without_a_tuple_per_record(no_tuples):
    records, rep = sample("long"), report("long")
    lists = prepare_timeline(records, rep)
    columns = prepare_timeline(as_columns(records), rep)
    w = (rep.window[1] - rep.window[0]) / 1e9
    views = [View(), View(x_range=(0.0, w), pad=1.0), View(x_range=(1.0, 1.03), pad=1.0),
             View(x_range=(1.0, 1.0005)), View(axis="trace")]
    modes = set()
    for view in views:
        fa, fb = timeline_figure(lists, view), timeline_figure(columns, view)
        same_figures(fa, fb)
        modes.add(fa.layout.meta["mode"])
    assert modes == {"aggregate", "exact"}
    same_figures(overview_figure(lists), overview_figure(columns))


KINETO = Path(__file__).parent / "data" / "kineto" / "trace_filter_sampled_rank-0.json.gz"


def test_an_imported_trace_as_columns_draws_its_call_stacks_and_op_names_as_its_records_do():
    records = load_any(KINETO)
    rep = analyze(records)
    lists = prepare_timeline(records, rep)
    columns = as_columns(records)
    with pytest.MonkeyPatch.context() as mp:
        no_tuples(mp)
        columns = prepare_timeline(columns, rep)
        assert any(st.text is not None for st in columns.sets)      # each op keeps its own name
        lo, hi = lists.full_range()
        for view in (View(), View(x_range=(lo, lo + (hi - lo) / 2000), pad=1.0)):
            same_figures(timeline_figure(lists, view), timeline_figure(columns, view))
    assert [ln.label for ln in lists.lanes] == [ln.label for ln in columns.lanes]
    assert any(ln.depth for ln in columns.lanes)                     # host threads as call stacks


def test_a_two_million_span_trace_draws_per_pixel_column_from_its_arrays(no_tuples):
    trace = tiled_trace(2_000_000)
    data = prepare_timeline(trace)
    assert data.n_spans >= 2_000_000
    view = View(width_px=1600, pad=1.0)
    fig = timeline_figure(data, view)
    meta = fig.layout.meta
    assert meta["mode"] == "aggregate" and meta["spans_visible"] == data.n_spans
    drawn = sum(len(t.x) for t in fig.data if t.x is not None)
    assert drawn < 0.05 * data.n_spans       # per column and lane, never per span
    # zoomed to a few steps: the spans themselves, as many as overlap the range
    lo = data.full_range()[0] + 0.5 * (data.full_range()[1] - data.full_range()[0])
    fig = timeline_figure(data, View(x_range=(lo, lo + 0.01)))
    a, b = int(lo * 1e9) + data.origin, int((lo + 0.01) * 1e9) + data.origin
    t0 = np.concatenate([trace.host_spans.arrays["t0"], trace.device_spans.arrays["t0"], trace.waits.arrays["t0"]])
    t1 = np.concatenate([trace.host_spans.arrays["t1"], trace.device_spans.arrays["t1"], trace.waits.arrays["t1"]])
    assert fig.layout.meta["mode"] == "exact"
    assert fig.layout.meta["spans_visible"] == int(np.count_nonzero((t0 <= b) & (t1 >= a))) > 0


def brute_busy(t0, t1, edges) -> np.ndarray:
    lo, hi = edges[:-1, None], edges[1:, None]
    return np.clip(np.minimum(t1[None, :], hi) - np.maximum(t0[None, :], lo), 0, None).sum(axis=1)


@pytest.mark.parametrize("span_ns", [10**6, 10**12])
def test_the_lane_index_answers_what_a_pass_over_every_span_would(span_ns):
    """Nested and overlapping spans on three lanes; with 10**12 ns spans the running sums pass
    2**63 and wrap: the answers must not change."""
    rng = np.random.default_rng(7)
    lanes, t0s, t1s = [], [], []
    for lane, n in ((0, 3000), (2, 20_000), (5, 400)):
        t0 = np.sort(rng.integers(0, 1000 * span_ns, n)) + 10**15
        t1 = t0 + rng.integers(0, span_ns, n) * rng.integers(1, 4, n)   # some end after the next starts
        lanes.append(np.full(n, lane, np.int32))
        t0s.append(t0)
        t1s.append(t1)
    lane, t0, t1 = np.concatenate(lanes), np.concatenate(t0s), np.concatenate(t1s)
    ix = LaneIndex(lane, t0, t1)
    assert np.abs(np.cumsum(t1 - t0.min(), dtype=np.float64)).max() > 2**63 or span_ns < 10**12
    assert list(ix.lanes) == [0, 2, 5]
    edges = np.linspace(10**15 + 100 * span_ns, 10**15 + 400 * span_ns, 301)
    for k, (a0, a1) in enumerate(zip(t0s, t1s)):
        want = brute_busy(a0.astype(np.float64), a1.astype(np.float64), edges)
        np.testing.assert_allclose(ix.busy(k, edges), want, rtol=1e-9, atol=1e-3 * span_ns)
        a, b = int(edges[0]), int(edges[40])
        s, _ = ix.segment(k)
        inside = np.flatnonzero((a0 <= b) & (a1 >= a))
        np.testing.assert_array_equal(ix.overlapping(k, a, b, t1), s + inside)
        assert ix.count(k, a, b) == len(inside)


def test_a_span_set_indexes_its_lanes_when_made():
    st = SpanSet("x", "device", "#000", np.array([1, 1, 3], np.int32), np.array([0, 5, 2]), np.array([9, 6, 3]),
                 np.zeros((3, 5)), "device_spans", np.arange(3))
    assert list(st.by_lane.lanes) == [1, 3] and st.by_lane.count_all(7, 8) == 1
