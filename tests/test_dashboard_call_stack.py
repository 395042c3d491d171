"""Issue 33 item 1: an imported trace's host lanes are drawn as call stacks, one row per depth
(as Perfetto draws them), on the real profiler traces in tests/data/.

Checked from the spans themselves, not from how the rows were computed: no two spans share a
row while both run; a span below the top row starts inside a span of its thread one row up;
and a span that strictly contains another of its thread is drawn above it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from photon_trace.dashboard.timeline.data import prepare_timeline
from photon_trace.dashboard.timeline.figure import lane_axis, timeline_figure
from photon_trace.dashboard.timeline.stack import stack_depths
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.importers import load_any

DATA = Path(__file__).parent / "data"
TRACES = [DATA / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz",
          DATA / "kineto" / "trace_filter_sampled_rank-0.json.gz",
          DATA / "nsys" / "pipit_saxpy0.sqlite.gz"]


def host_rows(data) -> dict[int, np.ndarray]:
    """Per host row (lane index): its spans as (t0, t1) rows, by start."""
    rows: dict[int, list] = {}
    for st in data.sets:
        if st.source != "host_spans":
            continue
        for lane, a, b in zip(st.lane.tolist(), st.t0.tolist(), st.t1.tolist()):
            rows.setdefault(lane, []).append((a, b))
    return {k: np.array(sorted(v), dtype=np.int64) for k, v in rows.items()}


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_imported_host_lanes_are_call_stacks(path):
    trace = load_any(path)
    data = prepare_timeline(trace, analyze(trace))
    rows = host_rows(data)
    lanes = data.lanes
    assert max(ln.depth for ln in lanes) >= 1                       # these traces do nest
    for lane, spans in rows.items():
        assert lanes[lane].kind == "host"
        assert np.all(spans[1:, 0] >= spans[:-1, 1]), f"{lanes[lane].label}: spans overlap in one row"
        if lanes[lane].depth:                                      # each starts inside one a row up
            up = rows[lane - 1]
            assert lanes[lane - 1].name == lanes[lane].name
            k = np.searchsorted(up[:, 0], spans[:, 0], side="right") - 1
            assert np.all(k >= 0) and np.all(up[k, 1] > spans[:, 0])
    # a host span strictly containing another of its thread is drawn above it
    by = [(st.lane[i], st.t0[i], st.t1[i]) for st in data.sets if st.source == "host_spans" for i in range(len(st))]
    by = sorted(by, key=lambda r: (lanes[r[0]].name, r[1], -r[2]))
    for (la, a0, a1), (lb, b0, b1) in zip(by, by[1:]):
        if lanes[la].name == lanes[lb].name and a0 <= b0 and b1 <= a1 and (a0, a1) != (b0, b1):
            assert lanes[la].depth < lanes[lb].depth


def test_a_call_stacks_rows_are_labelled_by_depth_and_the_figure_fits_them():
    trace = load_any(TRACES[1])
    data = prepare_timeline(trace, analyze(trace))
    ticks = lane_axis(data)["ticktext"]
    assert ticks[0] == "host · thread 4037 (python3.8)" and ticks[1] == "depth 1"
    fig = timeline_figure(data)
    assert fig.layout.xaxis.side == "top"                          # on screen however many lanes
    assert fig.layout.height < 1200 < 70 * len(data.lanes)          # the rows share the height


def test_stack_depth_of_nested_overlapping_and_separate_spans():
    # thread 0: A [0,10] holds B [2,5] and C [5,9]; D [10,12] starts as A ends; E [3,4] inside B
    # thread 1: F [0,4]; G [1,8] starts inside F and outlives it
    thread = np.array([0, 0, 0, 0, 0, 1, 1])
    t0 = np.array([0, 2, 5, 10, 3, 0, 1])
    t1 = np.array([10, 5, 9, 12, 4, 4, 8])
    assert stack_depths(thread, t0, t1).tolist() == [0, 1, 1, 0, 2, 0, 1]


def test_our_own_traces_keep_one_lane_per_thread():
    from helpers.dashboard_samples import sample, report
    data = prepare_timeline(sample("mask_sync"), report("mask_sync"))
    assert [ln.depth for ln in data.lanes] == [0] * len(data.lanes)
