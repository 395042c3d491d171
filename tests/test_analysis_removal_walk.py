"""The passes over a million gaps made arrays answer as the loops they replaced (issue 31).

``SplitTable.removed`` walks every gap for a fix as arrays (``removal_walk``); ``SplitTable.walked``
is the walk gap by gap, and each prediction must equal it to the bit, over blocks and over many or
few restarts. ``charging.host_work`` unions the waits and phases as arrays; the loop it replaced is
kept here as the reference.
"""
from __future__ import annotations

from array import array
from collections import defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_analysis_vectorised import SETTINGS, both, traces, windows

from photon_trace.telemetry.analysis import removal_walk
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.charging import HostWork, host_work
from photon_trace.telemetry.analysis.split_table import NONE, SplitTable
from photon_trace.telemetry.trace.lanes import host_phases

ROWS = [(Cause.HOST_BOUND, "plan"), (Cause.ACCIDENTAL_SYNC, "a.py:1"), (Cause.DISPATCH, "launch latency"),
        (Cause.COPY_WAIT, "mask")]
NS = st.integers(0, 400)


@st.composite
def tables(draw) -> SplitTable:
    """Gaps with random columns; per row, its chain or device time on some of them."""
    t = SplitTable()
    n = draw(st.integers(0, 40))
    for _ in range(n):
        full = draw(st.integers(1, 500))
        t.inside.append(draw(st.sampled_from((1.0, 0.5, 1 / 3, 0.0, 0.1))))
        t.full.append(full)
        t.late.append(draw(st.sampled_from((0, draw(NS)))))
        t.regained.append(draw(st.sampled_from((0, 0, 0, 1))))
        t.tail.append(draw(st.sampled_from((0, draw(NS)))))
        t.launch.append(draw(st.sampled_from((NONE, 0, draw(NS)))))
    for key in ROWS:
        where = sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))) if n else []
        source = t.device if Cause(key[0]).queued else t.chain
        if where:
            source[key] = (array("q", where), array("q", [draw(NS) for _ in where]))
    return t


@SETTINGS
@given(tables(), st.sets(st.sampled_from(ROWS), min_size=1), st.integers(0, 50), st.integers(1, 7), st.booleans())
def test_the_walk_as_arrays_predicts_as_the_walk_gap_by_gap(table, rows, launch_ns, block, doubling):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(removal_walk, "BLOCK", block)
        if doubling:
            mp.setattr(removal_walk, "_FEW", 0)
        got = table.removed(rows, launch_ns)
    want = table.walked(rows, launch_ns)
    assert [x.hex() for x in got] == [x.hex() for x in want]


def ref_host_work(trace, window, busy_ns):
    """``host_work`` as it was: a loop over the waits and the phase spans."""
    if trace.header.get("source"):
        return None
    w0, w1 = window

    def union(intervals):
        out = []
        for a, b in sorted(intervals):
            if out and a <= out[-1][1]:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return [(a, b) for a, b in out]

    def less(spans, holes):
        total, j = 0, 0
        for a, b in spans:
            total += b - a
            while j < len(holes) and holes[j][1] <= a:
                j += 1
            k = j
            while k < len(holes) and holes[k][0] < b:
                total -= min(b, holes[k][1]) - max(a, holes[k][0])
                k += 1
        return total

    clip = lambda t0, t1: (max(t0, w0), min(t1, w1))   # noqa: E731
    waits = union(clip(w.t0, w.t1) for w in trace.waits if w.t1 > w0 and w.t0 < w1 and w.t1 > w.t0)
    phases = host_phases(trace)
    spans = defaultdict(list)
    for h in trace.host_spans:
        if h.phase in phases and h.t1 > w0 and h.t0 < w1:
            spans[h.phase].append(clip(h.t0, h.t1))
    window_ns = max(0, w1 - w0)
    return HostWork(window_ns, busy_ns, window_ns - sum(b - a for a, b in waits),
                    {p: less(union(v), waits) for p, v in spans.items()})


@SETTINGS
@given(traces(), windows)
def test_host_work_as_arrays_equals_the_loop(trace, window):
    """Spans that end before they start included (``traces`` makes a few)."""
    for t in both(trace):
        got, want = host_work(t, window, 7), ref_host_work(t, window, 7)
        assert got == want and (got is None or list(got.phase_ns) == list(want.phase_ns))
