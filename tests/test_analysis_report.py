"""Per-step costs, idle fraction, syncs by site, L and z, the diagnosis, and the summary."""
from __future__ import annotations

import json

import pytest

from photon_trace.telemetry.analysis import Bubble, Cause, analyze, sync_sites
from photon_trace.telemetry.analysis.causes import fixable_by_host
from photon_trace.telemetry.analysis.bubbles import LAUNCH_LATENCY
from helpers.trace_builder import (
    COMMIT_SITE, MS, US, LoopCosts, TraceBuilder, blocking_trace, pipelined_trace)

C = LoopCosts()


def three_steps() -> TraceBuilder:
    """Steps 1-3 on a 1000 µs grid; step 2's forward starts 300 µs late (a host-bound bubble)."""
    b = TraceBuilder()
    for s, t in ((1, 0), (2, 1000), (3, 2000)):
        fwd_start = t + (300 if s == 2 else 0)
        b.compute("forward", s, fwd_start * US, (t + 700) * US, enqueued=(fwd_start - 5) * US)
        b.compute("sample", s, (t + 700) * US, (t + 1000) * US, enqueued=(fwd_start - 5) * US)
        b.copy("copy_back", s, (t + 1000) * US, (t + 1030) * US)
        b.host("plan", s, (t - 400) * US, (t - 300) * US)
        b.host("commit", s, (t + 900) * US, (t + 1300) * US)
        b.wait("commit: copy-back", (t + 900) * US, (t + 1032) * US, expected=True, site=COMMIT_SITE, step=s)
        b.step(s, rows=2)
    return b


def test_step_stats_measure_forward_sample_period_bookkeeping_and_idle():
    rep = analyze(three_steps().build(), (0, 2000 * US))
    assert [(s.step, s.forward_ns, s.sample_ns, s.period_ns, s.bookkeeping_ns, s.idle_ns, s.copy_ns)
            for s in rep.steps] == [
        # the gap before forward(2) lies in step 1's period: a period runs from first op to first op
        (1, 700 * US, 300 * US, 1300 * US, (100 + 400 - 132) * US, 300 * US, 30 * US),
        (2, 400 * US, 300 * US, 700 * US, (100 + 400 - 132) * US, 0, 30 * US)]
    assert rep.period_ms == 1.0 and rep.sample_ms == 0.3 and rep.forward_ms == pytest.approx(0.55)


def test_idle_fraction_is_idle_over_the_window():
    rep = analyze(three_steps().build(), (0, 2000 * US))
    assert (rep.busy_ns, rep.idle_ns, rep.window_ns) == (1700 * US, 300 * US, 2000 * US)
    assert rep.idle_fraction == pytest.approx(0.15)
    assert rep.tokens == 4 and rep.tokens_per_s == pytest.approx(4 / 2e-3)


def test_blocking_idle_is_the_serial_host_work_and_pipelining_hides_it():
    blk, pipe = analyze(blocking_trace(tokens=40)), analyze(pipelined_trace(tokens=40))
    busy = C.forward_ns + C.sample_ns
    serial = C.dispatch_ns + C.copy_ns + C.wake_ns + C.commit_ns + C.plan_ns + C.launch_ns
    assert blk.period_ms * MS == busy + serial and blk.mean_period_ms * MS == busy + serial
    assert all(s.idle_ns == serial for s in blk.steps)
    assert blk.idle_fraction == pytest.approx(serial / (busy + serial))
    # no finalize: the engine finalizes only steps with constrained rows (none here)
    assert blk.bookkeeping_ms * MS == C.plan_ns + C.launch_ns + C.commit_ns
    # each gap: the commit's wait for the copy proper, then every host phase after it, then the launch latency
    assert [(b.cause, b.detail) for b in blk.bubbles] == [
        (Cause.COMMIT_WAIT, COMMIT_SITE), (Cause.HOST_BOUND, "commit"), (Cause.HOST_BOUND, "plan"),
        (Cause.HOST_BOUND, "launch"), (Cause.DISPATCH, LAUNCH_LATENCY)] * len(blk.steps)
    assert [b.duration_ns for b in blk.bubbles[:5]] == [
        C.copy_ns + C.wake_ns, C.commit_ns, C.plan_ns, C.launch_ns, C.dispatch_ns]
    assert pipe.period_ms * MS == busy and pipe.idle_ns == 0 and pipe.bubbles == []


def test_idle_splits_into_host_late_and_launch_latency():
    # blocking: the next op is enqueued when launch ends, then waits dispatch_ns to start
    blk = analyze(blocking_trace(tokens=40))
    n = len(blk.steps)
    assert blk.launch_idle_ns == C.dispatch_ns * n
    assert blk.host_idle_ns == (C.copy_ns + C.wake_ns + C.commit_ns + C.plan_ns + C.launch_ns) * n
    assert blk.host_idle_ns + blk.launch_idle_ns == blk.idle_ns
    # a gap whose op was queued before it opened is all launch latency
    b = TraceBuilder()
    b.compute("forward", 1, 0, 100 * US, enqueued=0)
    b.compute("forward", 2, 150 * US, 250 * US, enqueued=50 * US)
    b.compute("forward", 3, 400 * US, 500 * US, enqueued=350 * US)
    rep = analyze(b.build(), (0, 500 * US))
    assert (rep.host_idle_ns, rep.launch_idle_ns) == (100 * US, 100 * US)


def test_syncs_are_grouped_by_site_with_count_wait_and_idle_cost():
    tr = TraceBuilder()
    for t0, t1, site in ((0, 10, "a.py:1"), (100, 130, "b.py:2"), (200, 220, "a.py:1"), (300, 300, "a.py:1")):
        tr.wait("sync", t0 * US, t1 * US, expected=False, site=site, step=1)
    tr.wait("commit: copy-back", 0, 50 * US, expected=True, site=COMMIT_SITE, step=1)
    bubbles = [Bubble(0, 70 * US, 70 * US, 2, Cause.ACCIDENTAL_SYNC, "b.py:2"),
               Bubble(0, 40 * US, 40 * US, 3, Cause.ACCIDENTAL_SYNC, "a.py:1"),
               Bubble(0, 90 * US, 90 * US, 4, Cause.HOST_BOUND, "plan")]
    rows = sync_sites(tr.build(), bubbles)
    assert [(s.site, s.count, s.wait_ns, s.idle_ns) for s in rows] == [
        ("b.py:2", 1, 30 * US, 70 * US), ("a.py:1", 3, 30 * US, 40 * US)]
    assert sync_sites(tr.build(), bubbles, window=(150 * US, 250 * US))[0][:3] == ("a.py:1", "sync", 1)


def test_diagnosis_ranks_causes_by_idle_and_predicts_the_window_without_each():
    # three gaps of 300 µs, each all host time of one kind; the ops were enqueued as they started
    b = TraceBuilder()
    for s, t in ((1, 0), (2, 1300), (3, 2600), (4, 3900)):
        b.compute("forward", s, t * US, (t + 1000) * US).step(s)
    b.host("plan", 2, 1000 * US, 1300 * US).host("plan", 3, 2300 * US, 2600 * US)
    b.wait("sync", 3300 * US, 3600 * US, expected=False, site="x.py:9", step=3)
    rep = analyze(b.build(), (0, 4900 * US))
    assert [(d.cause, d.site_or_phase, d.idle_ns // US) for d in rep.diagnosis] == [
        (Cause.HOST_BOUND, "plan", 600), (Cause.ACCIDENTAL_SYNC, "x.py:9", 300)]
    assert [d.share for d in rep.diagnosis] == [pytest.approx(2 / 3), pytest.approx(1 / 3)]
    assert [d.predicted_speedup for d in rep.diagnosis] == [pytest.approx(4900 / 4300), pytest.approx(4900 / 4600)]
    assert analyze(b.build(), (0, 1000 * US)).diagnosis == []


def test_a_fix_clears_a_gap_down_to_the_launch_latency_the_trace_measures_where_the_host_was_on_time():
    # forward(1) was queued behind sample(0) and starts 40 µs after it, as sample(1) after
    # forward(1): the clean launch latency. Step 2's forward comes 500 µs late (plan), then 100 µs
    # more (the launch latency after a late enqueue: 40 µs the device's own, 60 µs more because
    # it ran dry, which plan is charged). Removing plan's delay: the gap becomes 40 µs.
    b = TraceBuilder()
    b.compute("sample", 0, 0, 60 * US, enqueued=0).compute("forward", 1, 100 * US, 1100 * US, enqueued=0)
    b.compute("sample", 1, 1140 * US, 1200 * US, enqueued=0)
    b.host("plan", 2, 1000 * US, 1700 * US)
    b.compute("forward", 2, 1800 * US, 2800 * US, enqueued=1700 * US)
    b.compute("sample", 2, 2840 * US, 2900 * US, enqueued=1700 * US).step(0).step(1).step(2)
    rep = analyze(b.build(), (0, 2900 * US))
    assert rep.queued_gap_ns == 40 * US
    (plan,) = [d for d in rep.diagnosis if d.cause == Cause.HOST_BOUND]
    assert plan.idle_ns == 560 * US
    # the device's own: the three queued gaps and 40 µs of the late one
    assert [(d.cause, d.idle_ns) for d in rep.diagnosis if d.cause == Cause.DISPATCH] == [(Cause.DISPATCH, 160 * US)]
    assert plan.predicted_speedup == pytest.approx(2900 / (2900 - 560))    # 600 µs gap -> 40 µs
    assert plan.speedup_low == pytest.approx(2900 / (2900 - 500))          # the 100 µs latency stays
    assert plan.speedup_high == pytest.approx(2900 / (2900 - 600))         # the gap closes


def late_steps_with_a_copy_back(serial: bool) -> tuple[TraceBuilder, int]:
    """Six steps, each enqueued by a 300 µs plan that starts as the device runs dry and started
    20 µs after its enqueue; each step's 30 µs copy-back (queued with the step) runs first."""
    b, t = TraceBuilder(), 0
    b.header["device"] = {"name": "worker", "concurrent_streams": not serial}
    for step in range(1, 7):
        b.host("plan", step, t * US, (t + 300) * US)
        b.compute("forward", step, (t + 320) * US, (t + 820) * US, enqueued=(t + 300) * US)
        b.compute("sample", step, (t + 825) * US, (t + 1825) * US, enqueued=(t + 300) * US)
        b.copy("copy_back", step, (t + 1825) * US, (t + 1855) * US, enqueued=(t + 300) * US).step(step)
        t += 1825
    return b, t


@pytest.mark.parametrize("serial, floor_us", [(True, 30 + 20), (False, 20)])
def test_a_cleared_gap_keeps_the_device_s_own_tail_work_where_it_runs_one_op_at_a_time(serial, floor_us):
    # Every step starts late, so the device's own start latency is the quickest start from
    # its enqueue (20 µs). A device that runs one op at a time (the host-process worker) was
    # busy with the previous step's copy-back for the gap's first 30 µs: with plan's delay
    # removed, each 320 µs gap keeps that and the start latency; a GPU copies beside compute.
    b, t = late_steps_with_a_copy_back(serial)
    rep = analyze(b.build(), window=(0, (t + 30) * US))
    (plan,) = [d for d in rep.diagnosis if d.cause == Cause.HOST_BOUND]
    window = (t + 30) * US
    removed = 5 * (320 - floor_us) * US         # five gaps, the first step's forward follows none
    assert plan.predicted_speedup == pytest.approx(window / (window - removed))
    assert plan.speedup_high == pytest.approx(window / (window - 5 * (320 - (30 if serial else 0)) * US))


@pytest.mark.parametrize("serial", [True, False])
def test_the_device_s_own_tail_work_is_its_own_idle_not_the_host_s(serial):
    # Each 320 µs gap: the host's plan enqueues the step 300 µs in and the device starts it
    # 20 µs later. A device that runs one op at a time spends the first 30 µs on the previous
    # step's copy-back: that stretch is the device's (no plan fix shortens it), the rest plan's.
    b, t = late_steps_with_a_copy_back(serial)
    rep = analyze(b.build(), window=(0, (t + 30) * US))
    gaps = [[(x.cause, x.detail, x.duration_ns // US) for x in rep.bubbles if x.step == s] for s in range(2, 7)]
    tail = [(Cause.DEVICE_BUSY, "copy_back", 30)] if serial else []
    assert gaps == [tail + [(Cause.HOST_BOUND, "plan", 300 - (30 if serial else 0)),
                            (Cause.DISPATCH, LAUNCH_LATENCY, 20)]] * 5
    assert not fixable_by_host(Cause.DEVICE_BUSY)


def test_a_sync_over_the_device_s_tail_work_is_charged_the_host_time_it_delayed_after_it():
    # The device is busy with step 1's copy-back for the gap's first 30 µs; the host waits on a
    # sync for 110 µs from 10 µs before the gap, then plans until it enqueues step 2 at 200 µs.
    # Without the sync the host enqueues 110 µs sooner (at 90 µs, the copy-back long done):
    # the sync is charged 110 µs, none of it the copy-back's 30.
    b = TraceBuilder()
    b.header["device"] = {"name": "worker", "concurrent_streams": False}
    b.compute("forward", 1, 0, 1000 * US, enqueued=0).copy("copy_back", 1, 1000 * US, 1030 * US, enqueued=0)
    b.wait("read", 990 * US, 1100 * US, expected=False, site="x.py:7", step=1)
    b.host("plan", 2, 1100 * US, 1200 * US)
    b.compute("forward", 2, 1220 * US, 2220 * US, enqueued=1200 * US).step(1).step(2)
    rep = analyze(b.build(), (0, 2220 * US))
    assert [(x.cause, x.detail, x.duration_ns // US) for x in rep.bubbles] == [
        (Cause.DEVICE_BUSY, "copy_back", 30), (Cause.ACCIDENTAL_SYNC, "x.py:7", 110), (Cause.HOST_BOUND, "plan", 60),
        (Cause.DISPATCH, LAUNCH_LATENCY, 20)]


def test_a_queued_step_start_s_latency_is_measured_after_the_device_s_tail_work():
    def trace(serial: bool):
        b = TraceBuilder()
        b.header["device"] = {"name": "worker", "concurrent_streams": not serial}
        b.compute("sample", 0, 0, 60 * US, enqueued=0).copy("copy_back", 0, 60 * US, 90 * US, enqueued=0)
        b.compute("forward", 1, 130 * US, 1130 * US, enqueued=0).compute("sample", 1, 1170 * US, 1230 * US, enqueued=0)
        return analyze(b.step(0).step(1).build(), (0, 1230 * US))
    assert trace(serial=True).queued_gap_ns == 40 * US      # 70 µs, 30 of them the copy-back
    assert trace(serial=False).queued_gap_ns == 70 * US


def test_blocking_diagnosis_predicts_the_pipelined_period():
    blk = analyze(blocking_trace(tokens=40))
    pipelined_period = (C.forward_ns + C.sample_ns) / MS
    assert blk.host_free_speedup[0] == pytest.approx(blk.period_ms / pipelined_period)
    # removing the commit wait (pipelining) hides the host phases after it too
    (wait,) = [d for d in blk.diagnosis if d.cause == Cause.COMMIT_WAIT]
    assert wait.predicted_speedup == pytest.approx(blk.period_ms / pipelined_period, rel=0.02)


def test_L_is_the_mean_output_length_of_finished_requests():
    rep = analyze(pipelined_trace(streams=3, tokens=[10, 20, 30]))
    assert rep.L == 20.0
    b = TraceBuilder().request(1, "finalized", 0, 0).request(2, "finalized", 0, 0).step(1, rows=3)
    assert analyze(b.build()).L == 1.5  # no counts on the events: committed tokens per request


def test_z_is_the_zombie_share_of_row_steps():
    rep = analyze(pipelined_trace(tokens=40))
    assert rep.zombie_rows == 1 and rep.z == pytest.approx(1 / 41)
    assert analyze(blocking_trace(tokens=40)).z == 0.0
    batch = analyze(pipelined_trace(streams=4, tokens=[10, 10, 20, 20]))
    assert batch.zombie_rows == 4 and batch.z == pytest.approx(4 / (60 + 4))
    # only the last step (two zombies, nothing live) was wasted outright
    assert 0 < batch.z_steps < batch.z


def test_to_dict_is_json_and_keeps_the_api_names():
    rep = analyze(pipelined_trace(tokens=20))
    d = json.loads(json.dumps(rep.to_dict()))
    for name in ("window", "busy_ns", "idle_ns", "idle_fraction", "tokens", "tokens_per_s", "steps", "bubbles",
                 "syncs", "L", "zombie_rows", "z", "period_ms", "forward_ms", "sample_ms", "bookkeeping_ms",
                 "diagnosis"):
        assert name in d
    assert d["steps"][0]["period_ns"] == rep.steps[0].period_ns
    assert json.loads(json.dumps(rep.to_dict(tables=False)))["steps"] == len(rep.steps)
