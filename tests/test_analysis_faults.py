"""Injected faults in modelled runs: each found, attributed to its cause and site, and costed.

The cost of a fault is what it adds to the period of the same run without it;
the analysis must attribute that much idle (within 20%) to the fault's cause.
"""
from __future__ import annotations

import pytest

from photon_trace.telemetry.analysis import Cause, analyze
from helpers.trace_builder import (
    ITEM_REASON, ITEM_SITE, MASK_SYNC_REASON, MASK_SYNC_SITE, MS, LoopCosts, copy_wait_trace, host_delay_trace,
    item_sync_trace, pipelined_trace, sync_bug_trace)

# The synchronous mask upload runs on the compute stream (as on the devices), the fixed run's
# async one on the copy stream: the fix also takes that much busy time off the compute stream
# each step, which no idle analysis predicts; the comparisons below leave it out.
MOVED_NS = LoopCosts().mask_upload_ns


def injected_cost_per_step(faulty, clean) -> float:
    return faulty.mean_period_ms - clean.mean_period_ms


def attributed_per_step(rep, cause, detail) -> float:
    return sum(d.idle_ns for d in rep.diagnosis if (d.cause, d.site_or_phase) == (cause, detail)) / len(rep.steps) / MS


@pytest.mark.parametrize("streams", [1, 8])
def test_clean_pipelined_run_has_no_syncs_and_no_bubbles(streams):
    rep = analyze(pipelined_trace(streams=streams, tokens=40, constrained=streams == 8))
    assert rep.syncs == [] and rep.bubbles == [] and rep.idle_fraction == 0.0


@pytest.mark.parametrize("name, faulty, clean, cause, detail, moved_ns", [
    ("mask upload sync", sync_bug_trace(tokens=40), pipelined_trace(tokens=40, constrained=True),
     Cause.ACCIDENTAL_SYNC, MASK_SYNC_SITE, MOVED_NS),
    (".item() in commit", item_sync_trace(tokens=40), pipelined_trace(tokens=40), Cause.ACCIDENTAL_SYNC, ITEM_SITE, 0),
    ("delay in plan", host_delay_trace(tokens=40), pipelined_trace(tokens=40), Cause.HOST_BOUND, "plan", 0),
    ("slow mask upload", copy_wait_trace(tokens=40), pipelined_trace(tokens=40, constrained=True),
     Cause.COPY_WAIT, "mask_upload", 0),
])
def test_fault_is_attributed_to_its_cause_and_costed(name, faulty, clean, cause, detail, moved_ns):
    rep, base = analyze(faulty), analyze(clean)
    top = rep.diagnosis[0]
    assert (top.cause, top.site_or_phase) == (cause, detail)
    assert top.share > 0.85     # a host delay in plan shares its gap with the launch after it
    injected = injected_cost_per_step(rep, base) - moved_ns / MS
    assert injected > 0.1
    assert attributed_per_step(rep, cause, detail) == pytest.approx(injected, rel=0.2)
    # removing the fault gives what the diagnosis predicted (a modelled device keeps its speed).
    # Where no step started with its op queued (the sync in every step), a cleared step start
    # keeps the device's quickest start from idle, the model's 5 µs dispatch, which its queued
    # ops do not pay: the point falls short by that much per step (7% of the sync's gain).
    observed = rep.mean_period_ms / (base.mean_period_ms + moved_ns / MS)
    assert top.speedup_low <= observed * 1.01 and observed <= top.speedup_high * 1.01
    assert top.predicted_speedup - 1 == pytest.approx(observed - 1, rel=0.08)


@pytest.mark.parametrize("faulty, site, reason, extra", [
    (sync_bug_trace(tokens=40), MASK_SYNC_SITE, MASK_SYNC_REASON, 0),
    # the read right after commit(t)'s wait starts as step t+1's forward is dispatched, just before
    # it runs, and drains it: each read overlaps two periods, so the window meets one read more
    (item_sync_trace(tokens=40), ITEM_SITE, ITEM_REASON, 1),
])
def test_sync_sites_report_each_call_site_with_its_count_and_cost(faulty, site, reason, extra):
    rep = analyze(faulty)
    (s,) = rep.syncs
    assert (s.site, s.reason, s.count) == (site, reason, len(rep.steps) + extra)
    assert s.idle_ns == sum(b.duration_ns for b in rep.bubbles if b.cause == Cause.ACCIDENTAL_SYNC)
    assert s.wait_ns > 0
