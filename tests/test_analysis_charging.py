"""Interacting causes charged fairly (``analysis/charging.py``): each row charged what its own
removal gives back. The loop simulator's exact costs give the truth: the same workload run with
both faults, with each alone and with neither, so the gain of removing each is a difference of
periods, not an estimate. Through the real engine, against A/B-measured gains:
``test_faults_device.py``."""
from __future__ import annotations

from helpers.trace_builder import MS, TraceBuilder, blocking_trace, item_sync_trace, pipelined_trace
from photon_trace.telemetry.analysis import Cause, analyze
from photon_trace.telemetry.analysis.charging import HostWork, cap, charges, host_work
from photon_trace.telemetry.analysis.diagnosis import ranked

KW = dict(streams=4, tokens=40)


def per_step_ms(rep) -> float:
    return rep.window_ns / len(rep.steps) / MS


def rows(rep) -> dict:
    return {(d.cause, d.site_or_phase): d for d in rep.diagnosis}


def test_a_sync_and_a_slow_plan_in_one_gap_are_each_charged_what_removing_it_gives_back():
    # the host reads a device value after commit's wait (it waits for the queued forward), and
    # the next plan is one clean period slower: the slow plan is on the critical path only
    # because of the read, and the read's cost is held up by the plan
    period = per_step_ms(analyze(pipelined_trace(**KW)))
    delay = int(period * MS)
    both = analyze(item_sync_trace(plan_delay_ns=delay, **KW))
    read_only = analyze(item_sync_trace(**KW))
    plan_only = analyze(pipelined_trace(plan_delay_ns=delay, **KW))
    gain = {"read": per_step_ms(both) - per_step_ms(plan_only), "plan": per_step_ms(both) - per_step_ms(read_only)}
    assert gain["plan"] > 0.5 * period and gain["read"] > 0.5 * period     # each fault matters
    r = rows(both)
    (sync,) = [d for d in both.diagnosis if d.cause == Cause.ACCIDENTAL_SYNC]
    plan = r[(Cause.HOST_BOUND, "plan")]
    n = len(both.steps)
    for d, g in ((sync, gain["read"]), (plan, gain["plan"])):
        assert abs(d.charged_ns / n / MS - g) <= 0.25 * g, (d, g)
    # the partition gives the plan the little the sync left it; its charge adds what the sync took
    assert plan.idle_ns < 0.5 * plan.charged_ns
    assert plan.share == plan.charged_ns / sum(d.idle_ns for d in both.diagnosis)
    # the ranking follows the charges: the plan's gain is the larger here, and it comes first
    assert [(d.cause, d.site_or_phase) for d in ranked(both.diagnosis)][:2] == [
        (Cause.HOST_BOUND, "plan"), (sync.cause, sync.site_or_phase)]


def test_causes_that_do_not_interact_are_charged_their_bubbles():
    for trace in (pipelined_trace(plan_delay_ns=3 * MS, **KW), item_sync_trace(**KW)):
        rep = analyze(trace)
        host = [d for d in rep.diagnosis if d.idle_ns]
        total = sum(d.idle_ns for d in rep.diagnosis)
        assert all(d.charged_ns == d.idle_ns and d.share == d.idle_ns / total for d in host if
                   d.cause != Cause.HOST_BOUND or d.site_or_phase == "plan"), rep.diagnosis


def test_a_row_is_charged_at_most_what_the_critical_path_leaves_its_removal():
    # 10 ms window: the device busy 4 ms, the host waiting 3 ms and working 7 ms, 5 ms of it in plan
    b = TraceBuilder()
    b.compute("forward", 1, 0, 4 * MS)
    b.host("plan", 2, 2 * MS, 7 * MS).host("launch", 2, 7 * MS, 9 * MS)
    b.wait("read", 4 * MS, 7 * MS, expected=False, site="x.py:1", step=2)
    work = host_work(b.build(), (0, 10 * MS), busy_ns=4 * MS)
    # plan's own work is its time outside the wait inside it
    assert work == HostWork(10 * MS, 4 * MS, 7 * MS, {"plan": 2 * MS, "launch": 2 * MS})
    sync, plan = (Cause.ACCIDENTAL_SYNC, "x.py:1"), (Cause.HOST_BOUND, "plan")
    # without the sync, the host still works 7 ms: at most 3 ms back; without plan's work, 5 ms:
    # at most 5 ms back; the device's queued causes have no such bound
    assert (cap(sync, work), cap(plan, work), cap((Cause.DISPATCH, "launch latency"), work)) == (
        3 * MS, 5 * MS, None)
    assert charges({sync: 6 * MS, plan: 1 * MS}, [], work) == {sync: 3 * MS, plan: 1 * MS}
    # an imported program's host may idle where nothing is recorded: no bound
    b.header["source"] = {"format": "kineto"}
    assert host_work(b.build(), (0, 10 * MS), 4 * MS) is None


def test_a_blocking_loop_still_names_its_slow_phase_first():
    # its commit wait is the design's, not a fault: the cap bounds it, nothing charges it more
    rep = analyze(blocking_trace(plan_delay_ns=2 * MS, **KW))
    top = ranked(rep.diagnosis)[0]
    assert (top.cause, top.site_or_phase) == (Cause.HOST_BOUND, "plan"), rep.diagnosis[:3]
