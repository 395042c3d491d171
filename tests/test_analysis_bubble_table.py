"""``analyze`` keeps its bubbles as columns (``bubble_table.Bubbles``, issue 31): read as the list was.

The report's bubbles were a list of ``Bubble`` tuples; now they are arrays that build the same
tuples on demand. Checked against the list ``bubbles_of`` and ``with_cover`` make from the same
splits, on simulated runs whose copy stream covers part of the bubbles.
"""
from __future__ import annotations

import pickle
from collections import defaultdict

import pytest

from helpers.loop_sim import SyntheticRun, synthetic_trace
from photon_trace.telemetry.analysis.bubble_table import Bubbles
from photon_trace.telemetry.analysis.bubbles import bubbles_of, device_gaps, split_gaps, split_table
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.report import analyze
from photon_trace.telemetry.analysis.streams import with_cover
from photon_trace.telemetry.analysis.syncs import sync_sites
from photon_trace.telemetry.analysis.window import steady_state_window
from photon_trace.telemetry.trace.lanes import primary_stream
from photon_trace.telemetry.tracer import TraceLevel


@pytest.fixture(scope="module", params=[(True, 2), (False, 1)], ids=["mask-sync", "blocking"])
def trace(request):
    bug, depth = request.param
    return synthetic_trace(SyntheticRun(steps=200, requests=600, depth=depth, mask_upload_bug=bug,
                                        level=TraceLevel.ON, seed=5))


def test_columns_read_as_the_list_of_bubbles(trace):
    window = steady_state_window(trace)
    gaps = device_gaps(trace, window)
    listed = [b for g, s in split_gaps(trace, gaps) for b in bubbles_of(g, s)]
    columns = split_table(trace, gaps)[1]
    assert isinstance(columns, Bubbles) and len(columns) == len(listed) > 0
    assert columns == listed and list(columns) == listed
    assert columns[0] == listed[0] and columns[-1] == listed[-1] and columns[3:9] == listed[3:9]
    with pytest.raises(IndexError):
        columns[len(listed)]
    idle = defaultdict(int)
    for b in listed:
        idle[(b.cause, b.detail)] += b.duration_ns
    assert columns.per_row() == dict(idle)
    stream = primary_stream(trace)
    covered = with_cover(trace, columns, stream, window)
    assert isinstance(covered, Bubbles)
    assert list(covered) == with_cover(trace, listed, stream, window)
    assert any(b.covered_ns for b in covered)       # the copy stream covers some: the cover is read
    assert sync_sites(trace, covered, window) == sync_sites(trace, list(covered), window)
    assert pickle.loads(pickle.dumps(covered)) == covered


def test_the_report_lists_its_bubbles_as_before(trace):
    report = analyze(trace)
    assert isinstance(report.bubbles, Bubbles)
    rows = report.to_dict()["bubbles"]
    assert rows == [b._asdict() for b in list(report.bubbles)]
    assert report.bubble_ns == sum(b.duration_ns for b in report.bubbles)
    if any(b.cause == Cause.ACCIDENTAL_SYNC for b in report.bubbles):
        assert report.syncs and report.syncs[0].idle_ns > 0
