"""A gap the carried sync charge covers whole is split as the general rules split it.

``carried.carried_split`` writes that one case's answer directly (issue 31: every gap of our own
trace with the mask-upload bug). Each test splits the same gaps twice, in time order, with it and
with it switched off (``split`` then takes the general rules for every gap), and asks for the
same ``GapSplit`` and the same state after each gap: the charge carried, the last enqueue, the
waits charged, the host work the charge took. ``carried_pass`` takes the same lane a block of gaps
at a time inside ``shared_splits``: its tables, bubbles and syncs must be those of the pass gap
by gap.
"""
from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from test_analysis_shared_splits import _bubbles, _table
from test_analysis_vectorised import SETTINGS, both

from helpers.scale_traces import write_own_trace
from photon_trace.telemetry.analysis import attribution, carried_pass
from photon_trace.telemetry.analysis.attribution import Attribution
from photon_trace.telemetry.analysis.bubbles import device_gaps
from photon_trace.telemetry.analysis.carried import carried_split
from photon_trace.telemetry.analysis.shared_splits import shared_splits
from photon_trace.telemetry.analysis.window import compute_extent, steady_state_window
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, StepRecord, Trace

G = 5     # a coarse grid: edges of ops, spans and waits often coincide


def _state(a: Attribution) -> tuple:
    return a._carry, a._last, sorted(a._charged), a._shared


def _compare(trace: Trace, min_gap: int, monkeypatch) -> int:
    """Split every gap both ways; how many took the carried lane."""
    gaps = device_gaps(trace, compute_extent(trace))
    fast = Attribution(trace, trace.header["clock"]["device_error_ns"], min_gap)
    fast.launch = fast.launch_latency(gaps)
    slow = fast.fresh()
    taken = 0

    def counted(*args):
        nonlocal taken
        s = carried_split(*args)
        taken += s is not None
        return s

    for g in (g for g in gaps if g.full_ns >= min_gap):
        waited = fast._copy_waited(min(max(g.next.enqueued, g.prev.t1), g.next.t0), g.next.t0, g.next)
        monkeypatch.setattr(attribution, "carried_split", counted)
        got = fast.split(g.prev, g.next, waited)
        monkeypatch.setattr(attribution, "carried_split", lambda *_: None)
        want = slow.split(g.prev, g.next, waited)
        assert got == want and [type(p.cause) for p in got.parts] == [type(p.cause) for p in want.parts]
        assert _state(fast) == _state(slow)
    return taken


@st.composite
def our_runs(draw) -> Trace:
    """A loop of ours: compute ops one after another, each enqueued some time before or after the
    previous one ended; host phases over the gaps; unexpected waits (the sync) long enough to carry
    a charge across several gaps, some inside a gap, some reaching into one; now and then an
    expected wait or a span outside the phases, which the carried lane leaves to the rules."""
    ops, t, step = [], 0, 0
    for _ in range(draw(st.integers(2, 12))):
        t += draw(st.integers(0, 40)) * G
        n = draw(st.integers(1, 10)) * G
        step += draw(st.sampled_from((0, 0, 1)))
        ops.append(DeviceSpan("compute", "forward", step, 0, t, t + n, t + draw(st.integers(-30, 8)) * G))
        t += n
    host = []
    for _ in range(draw(st.integers(0, 16))):
        a = draw(st.integers(0, t // G)) * G
        host.append(HostSpan(draw(st.sampled_from(("plan", "launch", "commit", "finalize", "other"))), 0, 0, a,
                             a + draw(st.integers(0, 30)) * G, "main", -1, -1))
    waits = []
    for _ in range(draw(st.integers(1, 4))):
        a = draw(st.integers(0, t // G)) * G
        waits.append(HostWait("wait", draw(st.sampled_from((False, False, False, True))), a,
                              a + draw(st.integers(0, 120)) * G, draw(st.sampled_from(("a.py:1", "a.py:1", "b.py:2"))),
                              0, -1, -1))
    header = {"version": 2, "clock": {"device_error_ns": draw(st.integers(0, 2)) * G}}
    if draw(st.integers(0, 5)) == 0:
        header["graph_replays"] = 1
    return Trace(header, host, ops, waits, [StepRecord(s, "decode", 0, 1, 0, 0, 1) for s in range(step + 1)], [])


# The second gap enters with a.py:1's charge; inside it a b.py:2 wait is covered by a later a.py:1
# one: its own stretch is none of the sync part (another site's), so all of it carries on
OTHER_SITE = Trace({"version": 2, "clock": {"device_error_ns": 0}},
                   [HostSpan("plan", 0, 0, 2040, 2095, "main", -1, -1),
                    HostSpan("launch", 0, 0, 2200, 2290, "main", -1, -1)],
                   [DeviceSpan("compute", "forward", 0, 0, t0, t0 + 10, e)
                    for t0, e in ((2000, 2000), (2100, 2095), (2300, 2290), (2600, 2590))],
                   [HostWait("wait", False, 1000, 2040, "a.py:1", 0, -1, -1),
                    HostWait("wait", False, 2100, 2200, "b.py:2", 0, -1, -1),
                    HostWait("wait", False, 2110, 2200, "a.py:1", 0, -1, -1)],
                   [StepRecord(0, "decode", 0, 1, 0, 0, 1)], [])


@SETTINGS
@given(our_runs(), st.sampled_from((0, G, 4 * G)))
@example(OTHER_SITE, 0)
def test_carried_gaps_are_split_as_the_rules_split_them(trace, min_gap):
    with pytest.MonkeyPatch.context() as mp:
        for tr in both(trace):
            _compare(tr, min_gap, mp)


def test_our_simulated_trace_takes_the_carried_lane_with_the_same_answers(tmp_path, monkeypatch):
    """The mask-upload bug carries the upload's charge through nearly every gap: nearly every gap
    takes the lane, and each answer is the rules' answer."""
    trace = load_any(write_own_trace(tmp_path / "own.trace.jsonl.gz", 6000).path)
    gaps = device_gaps(trace, compute_extent(trace))
    taken = _compare(trace, 20_000, monkeypatch)
    assert taken > 0.9 * int((gaps.full_ns >= 20_000).sum())


def _answers(shared) -> tuple | None:
    if shared is None:
        return None
    return _table(shared.table), _bubbles(shared.bubbles), _bubbles(shared.syncs), shared.launch


def _both_passes(trace: Trace, window: tuple[int, int], min_gap: int, block: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(carried_pass, "BLOCK", block)
        got = shared_splits(trace, window, min_gap_ns=min_gap)
        mp.setattr(carried_pass, "applies", lambda _: False)
        want = shared_splits(trace, window, min_gap_ns=min_gap)
    assert _answers(got) == _answers(want)


@SETTINGS
@given(our_runs(), st.sampled_from((0, G, 4 * G)), st.integers(0, 4), st.integers(0, 4), st.integers(1, 4))
@example(OTHER_SITE, 0, 0, 0, 2)
def test_the_pass_a_block_at_a_time_reads_as_the_pass_gap_by_gap(trace, min_gap, cut_start, cut_end, block):
    """Windows from the whole run to a few gaps less at either end; blocks of a few gaps."""
    for tr in both(trace):
        ops = sorted(tr.device_spans, key=lambda d: (d.t0, d.t1))
        w0, w1 = ops[min(cut_start, len(ops) - 1)].t0, ops[max(len(ops) - 1 - cut_end, 0)].t1
        _both_passes(tr, (w0, max(w0, w1)), min_gap, block)


def test_our_simulated_trace_reads_the_same_a_block_at_a_time(tmp_path):
    trace = load_any(write_own_trace(tmp_path / "own.trace.jsonl.gz", 6000).path)
    _both_passes(trace, steady_state_window(trace), 20_000, 100)
