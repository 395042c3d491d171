"""``analyze`` reads the splits once (issue 31): what it keeps must answer as the pairs did.

``split_table.SplitTable`` replaces the ``(Gap, GapSplit)`` pairs the diagnosis read; the gate's
whole-run sync pass splits only the gaps that may hold a sync (``Attribution.passed_syncless``);
whether a gap waited for a copy is asked for every gap at once (``Attribution.copy_waits``).
Each is checked here against the per-gap code it replaced, kept below as the reference: on the
random small traces of ``test_analysis_vectorised`` (lists and ``Columns``) and on simulated
runs with the mask-upload sync, where sync charges carry across gaps.
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_analysis_vectorised import SETTINGS, both, traces, windows

from helpers.loop_sim import SyntheticRun, synthetic_trace
from photon_trace.telemetry.analysis.attribution import Attribution
from photon_trace.telemetry.analysis.bubbles import bubbles_of, device_gaps, iter_splits, split_gaps
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.charging import shared_idle
from photon_trace.telemetry.analysis.diagnosis import Removal, _speedup, predict_each
from photon_trace.telemetry.analysis.split_table import SplitTable
from photon_trace.telemetry.analysis.window import compute_extent, steady_state_window
from photon_trace.telemetry.trace.records import DeviceSpan, StepRecord, Trace
from photon_trace.telemetry.tracer import TraceLevel


def ref_predict_each(splits, window_ns, fixes, launch_ns=0):
    """``predict_each`` as it was: one pass over the pairs, every fix at each gap."""
    launch_ns = launch_ns or 0
    host = {k: [r for r in rows if not Cause(r[0]).queued] for k, rows in fixes.items()}
    device = {k: {r for r in rows if Cause(r[0]).queued} for k, rows in fixes.items()}
    shift = dict.fromkeys(fixes, 0)
    total = {k: [0.0, 0.0, 0.0] for k in fixes}
    for gap, s in splits:
        inside = (gap.t1 - gap.t0) / gap.full_ns
        full, late = gap.full_ns - s.no_work_ns, s.host_late_ns
        for k in fixes:
            t = total[k]
            if device[k]:
                own = sum(p.t1 - p.t0 for p in s.parts if (p.cause, p.detail) in device[k]) * inside
                t[0], t[1], t[2] = t[0] + own, t[1] + own, t[2] + own
            if s.regained:
                shift[k] = 0
            shift[k] += sum(s.chain.get(r, 0) for r in host[k])
            if late == 0 or shift[k] == 0:
                continue
            cut = min(shift[k], late)
            shift[k] -= cut
            beyond_tail = late - min(late, s.tail_ns)
            if cut < beyond_tail:
                p = lo = hi = cut
            elif beyond_tail == 0:
                continue
            else:
                own = s.launch_ns if s.launch_ns is not None else launch_ns
                floor = min(full, s.tail_ns + own)
                p, lo, hi = (full - floor, full - min(full, max(floor, full - beyond_tail)),
                             full - min(full, s.tail_ns))
            t[0], t[1], t[2] = t[0] + p * inside, t[1] + lo * inside, t[2] + hi * inside
    return {k: Removal(int(p), _speedup(window_ns, p), _speedup(window_ns, lo), _speedup(window_ns, hi))
            for k, (p, lo, hi) in total.items()}


def _fixes(splits) -> dict:
    keys = {(p.cause, p.detail) for _, s in splits for p in s.parts}
    keys |= {k for _, s in splits for k in s.chain}
    fixes = {key: {key} for key in keys}
    fixes["host"] = {k for k in keys if not Cause(k[0]).queued}
    fixes["all"] = set(keys)
    return fixes


def _check_table(trace, window, min_gap=20_000):
    splits = split_gaps(trace, device_gaps(trace, window), min_gap_ns=min_gap)
    fixes = _fixes(splits)
    for launch in (0, splits.launch_ns, 7):
        assert predict_each(SplitTable.of(splits), 10_000_000, fixes, launch) == \
            ref_predict_each(splits, 10_000_000, fixes, launch)
    assert dict(SplitTable.of(splits).shared) == shared_idle(splits)


def _check_syncs_only(trace, window, min_gap=20_000):
    gaps = device_gaps(trace, window)
    every = [b for g, s in iter_splits(trace, gaps, min_gap_ns=min_gap)[1] for b in bubbles_of(g, s)
             if b.cause == Cause.ACCIDENTAL_SYNC]
    only = [b for g, s in iter_splits(trace, gaps, min_gap_ns=min_gap, syncs_only=True)[1] for b in bubbles_of(g, s)
            if b.cause == Cause.ACCIDENTAL_SYNC]
    assert only == every


def _check_copy_waits(trace, window, slack=3):
    gaps = device_gaps(trace, window)
    att = Attribution(trace, slack, 0)
    waited = att.copy_waits(gaps).tolist()
    for g, w in zip(gaps, waited):
        e = min(max(g.next.enqueued, g.prev.t1), g.next.t0)
        assert w == att._copy_waited(e, g.next.t0, g.next)


MIN_GAP = st.integers(0, 40)     # the random traces' gaps are tens of ns: a bubble threshold to match


@SETTINGS
@given(traces(), windows, MIN_GAP)
def test_the_split_table_predicts_and_shares_as_the_pairs_did(trace, window, min_gap):
    for t in both(trace):
        _check_table(t, window, min_gap)


@SETTINGS
@given(traces(), windows, MIN_GAP)
def test_the_sync_pass_finds_the_sync_bubbles_every_split_finds(trace, window, min_gap):
    for t in both(trace):
        _check_syncs_only(t, window, min_gap)


@SETTINGS
@given(traces(), windows, st.integers(0, 10))
def test_copy_waits_of_every_gap_equal_the_per_gap_question(trace, window, slack):
    for t in both(trace):
        _check_copy_waits(t, window, slack)


@pytest.mark.parametrize("bug,depth", [(True, 2), (True, 1), (False, 1)])
def test_simulated_runs_with_syncs_carried_across_gaps(bug, depth):
    trace = synthetic_trace(SyntheticRun(steps=300, requests=900, depth=depth, mask_upload_bug=bug,
                                         level=TraceLevel.ON, seed=3))
    gaps = device_gaps(trace, compute_extent(trace))
    split = len(list(iter_splits(trace, gaps, syncs_only=True)[1]))
    every = len(list(iter_splits(trace, gaps)[1]))
    # with the sync (a charge in nearly every gap) some gaps are split; without it, bubbles but none split
    assert (0 < split <= every) if bug else split == 0 < every
    for window in (steady_state_window(trace), compute_extent(trace)):
        _check_table(trace, window)
        _check_syncs_only(trace, window)
        _check_copy_waits(trace, window)


def test_a_copy_ending_within_the_clock_slack_after_the_gap_counts_as_waited_for():
    # the next op's step's copy ends 3 ns after the gap closes: within a slack of 5, waited for
    trace = Trace({"version": 2, "clock": {"device_error_ns": 5}}, [],
                  [DeviceSpan("compute", "forward", 0, 0, 0, 50, 0), DeviceSpan("compute", "forward", 1, 0, 100, 150, 60),
                   DeviceSpan("copy", "mask_upload", 1, 0, 90, 103, 0)],
                  [], [StepRecord(s, "decode", 0, 1, 0, 0, 1) for s in (0, 1)], [])
    for t in both(trace):
        _check_copy_waits(t, (0, 200), 5)
        assert Attribution(t, 5, 0).copy_waits(device_gaps(t, (0, 200))).tolist() == [True]
