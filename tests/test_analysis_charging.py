"""Interacting causes charged fairly (``analysis/charging.py``): each row charged what its own
removal gives back. The loop simulator's exact costs give the truth: the same workload run with
both faults, with each alone and with neither, so the gain of removing each is a difference of
periods, not an estimate. Through the real engine, against A/B-measured gains:
``test_faults_device.py``."""
from __future__ import annotations

from helpers.trace_builder import MS, TraceBuilder, blocking_trace, item_sync_trace, pipelined_trace
from photon_trace.telemetry.analysis import Cause, analyze
from photon_trace.telemetry.analysis.bubbles import device_gaps, split_gaps
from photon_trace.telemetry.analysis.charging import HostWork, cap, charged_spans, charges, host_work
from photon_trace.telemetry.trace.records import Trace
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


def sleeping_plan(trace: Trace, delay_ns: int) -> Trace:
    """``trace`` with each plan's counters saying it slept ``delay_ns`` of itself (off the CPU,
    not runnable): the real engine's slow plan is a sleep, ``host_blocked`` in plan."""
    def slept(h):
        if h.phase != "plan" or h.t1 - h.t0 < delay_ns:
            return h._replace(cpu_ns=h.t1 - h.t0, runq_ns=0)
        return h._replace(cpu_ns=h.t1 - h.t0 - delay_ns, runq_ns=0)
    return Trace(trace.header, [slept(h) for h in trace.host_spans], trace.device_spans, trace.waits,
                 trace.steps, trace.requests)


def plan_rows(rep) -> int:
    """The plan's charge, whether or not the host ran in it (its three rows)."""
    return sum(d.charged_ns for d in rep.diagnosis if d.site_or_phase == "plan")


def test_a_sync_before_a_sleeping_plan_is_charged_the_sleep_it_delays_and_the_plan_keeps_it_too():
    # as above, but the plan's delay is a sleep (the real engine's fault): the host did not run in
    # it, so its stretches are ``host_blocked`` in plan. The read still delays the sleep by its
    # wait (it starts that much later), and removing the sleep still closes what the read took
    period = per_step_ms(analyze(pipelined_trace(**KW)))
    delay = int(period * MS)
    both = analyze(sleeping_plan(item_sync_trace(plan_delay_ns=delay, **KW), delay))
    gain = {"read": per_step_ms(both) - per_step_ms(analyze(pipelined_trace(plan_delay_ns=delay, **KW))),
            "plan": per_step_ms(both) - per_step_ms(analyze(item_sync_trace(**KW)))}
    n = len(both.steps)
    assert any(d.cause == Cause.HOST_BLOCKED and d.site_or_phase == "plan" and d.idle_ns for d in both.diagnosis)
    (sync,) = [d for d in both.diagnosis if d.cause == Cause.ACCIDENTAL_SYNC]
    # before, the read took only host code after it: charged its own stretch, a sliver of its gain
    assert abs(sync.charged_ns / n / MS - gain["read"]) <= 0.25 * gain["read"], (sync, gain)
    assert abs(plan_rows(both) / n / MS - gain["plan"]) <= 0.25 * gain["plan"], (both.diagnosis[:4], gain)


def test_a_rows_charged_stretches_add_up_to_its_charge_before_the_cap():
    trace = sleeping_plan(item_sync_trace(plan_delay_ns=3 * MS, **KW), 3 * MS)
    rep = analyze(trace)
    spans = charged_spans(split_gaps(trace, device_gaps(trace, rep.window)))
    idle = {(d.cause, d.site_or_phase): d.idle_ns for d in rep.diagnosis}
    uncapped = charges(idle, split_gaps(trace, device_gaps(trace, rep.window)), None)
    assert {k: sum(b - a for a, b in v) for k, v in spans.items()} == {k: v for k, v in uncapped.items() if v}
    assert all(a < b <= c for v in spans.values() for (a, b), (c, _) in zip(v, v[1:]))   # disjoint, in order


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
    # the host not running in plan is bounded as the phase is (its own part of it is at most the
    # phase's: a looser bound, never a wrong one)
    assert cap((Cause.HOST_BLOCKED, "plan"), work) == cap((Cause.HOST_DESCHEDULED, "plan"), work) == 5 * MS
    assert charges({sync: 6 * MS, plan: 1 * MS}, [], work) == {sync: 3 * MS, plan: 1 * MS}
    # an imported program's host may idle where nothing is recorded: no bound
    b.header["source"] = {"format": "kineto"}
    assert host_work(b.build(), (0, 10 * MS), 4 * MS) is None


def test_a_blocking_loop_still_names_its_slow_phase_first():
    # its commit wait is the design's, not a fault: the cap bounds it, nothing charges it more
    rep = analyze(blocking_trace(plan_delay_ns=2 * MS, **KW))
    top = ranked(rep.diagnosis)[0]
    assert (top.cause, top.site_or_phase) == (Cause.HOST_BOUND, "plan"), rep.diagnosis[:3]


def late_start_trace(wait_from_ms: float):
    """A read of a device value waits for step 2's forward (it ends at 20 ms); then plan (to 29.5
    ms) and launch enqueue step 3's forward at 30 ms, which the device starts 4 ms later, though
    it starts a queued step 0.1 ms after it can (step 2's): a device that ran dry, 3.9 ms late."""
    b = TraceBuilder()
    b.compute("forward", 1, 0, 10 * MS, enqueued=0)
    b.compute("forward", 2, 10 * MS + MS // 10, 20 * MS, enqueued=5 * MS)
    b.compute("forward", 3, 34 * MS, 40 * MS, enqueued=30 * MS)
    b.wait("read", int(wait_from_ms * MS), 20 * MS, expected=False, site="x.py:1", step=2)
    b.host("plan", 3, 20 * MS, 29 * MS + MS // 2).host("launch", 3, 29 * MS + MS // 2, 30 * MS)
    return b.build()


def test_a_sync_is_charged_a_late_start_only_from_what_is_left_of_its_wait():
    sync, plan = (Cause.ACCIDENTAL_SYNC, "x.py:1"), (Cause.HOST_BOUND, "plan")

    def charged(trace):
        spans = charged_spans(split_gaps(trace, device_gaps(trace, (0, 40 * MS))))
        return {k: sum(b - a for a, b in v) for k, v in spans.items()}
    # an 8 ms wait moves the host 8 ms earlier, and nothing after it more: its charge (8 ms of the
    # plan after it) is all of it; the device's late start is the plan's, whose 9.5 ms left it dry
    # (before, the largest host-late cause took it, the sync: 11.9 ms for an 8 ms wait)
    short = charged(late_start_trace(12))
    assert short[sync] == 8 * MS
    assert short[plan] == 9 * MS + MS // 2 + 3 * MS + 9 * MS // 10      # its own, what the sync took, the late start
    # a 20 ms wait has 10 ms left after the host work: the late start is the sync's
    assert charged(late_start_trace(0))[sync] == 10 * MS + 3 * MS + 9 * MS // 10
