"""Bubble detection and attribution on hand-built traces with exact timings (µs).

A gap is split by what covers each part of it; ``parts`` lists the bubbles as
``(t0, t1, cause, detail)`` in µs so each test states the whole split.
"""
from __future__ import annotations

from photon_trace.telemetry.analysis import (
    OUTSIDE_PHASES, Bubble, Cause, analyze, busy_intervals, device_gaps, find_bubbles)
from photon_trace.telemetry.analysis.bubbles import LAUNCH_LATENCY
from helpers.code_sites import COMMIT_SITE as COMMIT, ITEM_SITE as SITE
from helpers.trace_builder import US, TraceBuilder

WINDOW = (0, 10_000 * US)
LATENCY = (Cause.DISPATCH, LAUNCH_LATENCY)


def two_forwards(gap_start=1000, gap_end=1500, enqueued=1490, **settings) -> TraceBuilder:
    """forward(1) on [0, gap_start), forward(2) from gap_end, enqueued at ``enqueued`` (all µs)."""
    b = TraceBuilder(**settings)
    b.compute("forward", 1, 0, gap_start * US, enqueued=0)
    b.compute("forward", 2, gap_end * US, (gap_end + 1000) * US, enqueued=enqueued * US)
    return b.step(1).step(2)


def blocking_tick(phases: tuple[int, int, int, int], wait: tuple[int, int], **gap) -> TraceBuilder:
    """Blocking (depth 1) ``two_forwards`` whose host runs commit(1), plan(2) and launch(2) back to
    back between ``phases``' four times, commit waiting on the copy-back over ``wait`` (all µs)."""
    commit, plan, launch, end = (t * US for t in phases)
    b = two_forwards(depth=1, **gap)
    b.host("commit", 1, commit, plan).host("plan", 2, plan, launch).host("launch", 2, launch, end)
    return b.wait("commit: copy-back", wait[0] * US, wait[1] * US, expected=True, site=COMMIT, step=1)


def parts(bubbles: list[Bubble]) -> list[tuple]:
    return [(b.t0 // US, b.t1 // US, b.cause, b.detail) for b in bubbles]


def split(b: TraceBuilder, window=WINDOW) -> list[tuple]:
    return parts(find_bubbles(b.build(), window))


def test_busy_is_the_union_of_compute_ops_and_ignores_the_copy_stream():
    b = TraceBuilder()
    b.compute("forward", 1, 0, 100 * US).compute("sample", 1, 80 * US, 150 * US)  # overlapping
    b.compute("forward", 2, 300 * US, 400 * US)
    b.copy("copy_back", 1, 150 * US, 350 * US)
    tr = b.build()
    assert busy_intervals(tr, WINDOW) == [(0, 150 * US), (300 * US, 400 * US)]
    assert busy_intervals(tr, (50 * US, 320 * US)) == [(50 * US, 150 * US), (300 * US, 320 * US)]
    gaps = device_gaps(tr, WINDOW)
    assert [(g.t0, g.t1, g.prev.op, g.next.step) for g in gaps] == [(150 * US, 300 * US, "sample", 2)]


def test_gaps_under_the_threshold_are_dispatch_not_bubbles():
    b = TraceBuilder()
    b.compute("forward", 1, 0, 100 * US).compute("sample", 1, 119 * US, 200 * US)     # 19 µs
    b.compute("forward", 2, 220 * US, 300 * US, enqueued=210 * US)                     # 20 µs
    b.step(1).step(2)
    assert split(b) == [(200, 210, Cause.HOST_BOUND, OUTSIDE_PHASES), (210, 220, *LATENCY)]
    rep = analyze(b.build(), (0, 300 * US))
    assert rep.idle_ns == 39 * US and rep.bubble_ns == 20 * US and rep.dispatch_ns == 19 * US
    assert rep.busy_ns + rep.idle_ns == rep.window_ns


# -- rule 2: each cause is charged its part; a sync costs the host time it lost ---------------

def test_a_sync_is_charged_its_own_length_from_the_gap_and_the_host_phases_keep_the_rest():
    b = two_forwards()
    b.host("commit", 1, 800 * US, 1400 * US).host("launch", 2, 1400 * US, 1490 * US)
    b.wait("host read of a device value", 900 * US, 1010 * US, expected=False, site=SITE, step=1)
    # the wait lasted 110 µs: without it the host would have enqueued 110 µs earlier
    assert split(b) == [(1000, 1110, Cause.ACCIDENTAL_SYNC, SITE), (1110, 1400, Cause.HOST_BOUND, "commit"),
                        (1400, 1490, Cause.HOST_BOUND, "launch"), (1490, 1500, *LATENCY)]


def test_a_drain_ending_as_the_gap_opens_costs_the_host_work_after_it():
    b = two_forwards()
    b.host("finalize", 2, 700 * US, 1300 * US)
    b.wait("mask upload: drain (sync)", 700 * US, 1000 * US, expected=False, site=SITE, step=2)
    assert split(b) == [(1000, 1300, Cause.ACCIDENTAL_SYNC, SITE), (1300, 1490, Cause.HOST_BOUND, OUTSIDE_PHASES),
                        (1490, 1500, *LATENCY)]


def test_a_brief_sync_in_a_slow_host_is_charged_only_its_wait():
    # The host is slow in plan whatever happens; the device is long idle when plan reads a
    # device value, which takes 30 µs. The old rule charged the sync the whole gap.
    b = two_forwards(gap_end=3500, enqueued=3490)
    b.host("plan", 2, 500 * US, 3400 * US).host("launch", 2, 3400 * US, 3490 * US)
    b.wait("host read of a device value", 3000 * US, 3030 * US, expected=False, site=SITE, step=2)
    assert split(b) == [(1000, 3000, Cause.HOST_BOUND, "plan"), (3000, 3030, Cause.ACCIDENTAL_SYNC, SITE),
                        (3030, 3400, Cause.HOST_BOUND, "plan"), (3400, 3490, Cause.HOST_BOUND, "launch"),
                        (3490, 3500, *LATENCY)]


def test_slack_absorbs_the_device_clock_error():
    b = two_forwards()
    b.wait("sync", 900 * US, 995 * US, expected=False, site=SITE, step=1)
    assert split(b)[0] == (1000, 1490, Cause.HOST_BOUND, OUTSIDE_PHASES)      # ended before the gap: not its cause
    b.header["clock"]["device_error_ns"] = 10 * US
    assert split(b)[0] == (1000, 1095, Cause.ACCIDENTAL_SYNC, SITE)


def test_a_zero_length_wait_blocks_nothing():
    b = two_forwards()
    b.host("plan", 2, 1000 * US, 1490 * US)
    b.wait("sync", 1200 * US, 1200 * US, expected=False, site=SITE, step=2)
    assert split(b) == [(1000, 1490, Cause.HOST_BOUND, "plan"), (1490, 1500, *LATENCY)]


def test_a_wait_that_began_after_the_op_was_enqueued_held_nothing_up():
    b = two_forwards(enqueued=1200)
    b.host("plan", 2, 900 * US, 1200 * US)
    b.wait("sync", 1300 * US, 1450 * US, expected=False, site=SITE, step=2)
    assert split(b) == [(1000, 1200, Cause.HOST_BOUND, "plan"), (1200, 1500, *LATENCY)]


def test_a_gc_pause_after_the_commit_wait_is_the_commit_phase_not_the_wait():
    # blocking: the commit wait overlaps the gap's first 10 µs, then a 4 ms pause in commit
    b = blocking_tick((900, 5000, 5100, 5190), wait=(900, 1010), gap_end=5200, enqueued=5190)
    assert split(b) == [(1000, 1010, Cause.COMMIT_WAIT, COMMIT), (1010, 5000, Cause.HOST_BOUND, "commit"),
                        (5000, 5100, Cause.HOST_BOUND, "plan"), (5100, 5190, Cause.HOST_BOUND, "launch"),
                        (5190, 5200, *LATENCY)]


# -- rule 8: blocking's gap is the copy wait proper, then the host phases after it -------------

def test_blocking_gap_is_the_commit_wait_then_each_host_phase_after_it():
    b = blocking_tick((700, 1300, 1400, 1490), wait=(710, 1040))
    assert split(b) == [(1000, 1040, Cause.COMMIT_WAIT, COMMIT), (1040, 1300, Cause.HOST_BOUND, "commit"),
                        (1300, 1400, Cause.HOST_BOUND, "plan"), (1400, 1490, Cause.HOST_BOUND, "launch"),
                        (1490, 1500, *LATENCY)]


def test_blocking_stage_gap_after_the_commit_wait_is_launch():
    b = TraceBuilder(depth=1)
    b.compute("sample", 1, 0, 1000 * US)
    b.wait("commit: copy-back", 500 * US, 1050 * US, expected=True, site=COMMIT, step=1)
    b.host("commit", 1, 500 * US, 1150 * US).host("plan", 2, 1150 * US, 1250 * US)
    b.compute("stage", 2, 1300 * US, 1320 * US, enqueued=1300 * US)
    b.compute("forward", 2, 1400 * US, 2000 * US, enqueued=1400 * US)
    b.host("launch", 2, 1250 * US, 1450 * US).step(1).step(2)
    assert split(b) == [(1000, 1050, Cause.COMMIT_WAIT, COMMIT), (1050, 1150, Cause.HOST_BOUND, "commit"),
                        (1150, 1250, Cause.HOST_BOUND, "plan"), (1250, 1300, Cause.HOST_BOUND, "launch"),
                        (1320, 1400, Cause.HOST_BOUND, "launch")]


def test_a_pipelined_commit_still_waiting_when_the_device_runs_dry_is_the_wait_not_commit_work():
    # Pipelined: commit(0) waits for step 0's copy, which lands just after forward(1) ends.
    b = two_forwards()
    b.host("commit", 0, 700 * US, 1300 * US).host("plan", 2, 1300 * US, 1400 * US)
    b.wait("commit: copy-back", 710 * US, 1040 * US, expected=True, site=COMMIT, step=0)
    assert split(b) == [(1000, 1040, Cause.COMMIT_WAIT, COMMIT), (1040, 1300, Cause.HOST_BOUND, "commit"),
                        (1300, 1400, Cause.HOST_BOUND, "plan"), (1400, 1490, Cause.HOST_BOUND, OUTSIDE_PHASES),
                        (1490, 1500, *LATENCY)]


# -- rule 3: host time outside every phase is named as such -------------------------------------

def test_host_time_is_split_by_phase_and_sub_phases_never_compete_with_theirs():
    b = two_forwards(enqueued=1480)
    b.host("commit", 1, 900 * US, 1100 * US).host("plan", 2, 1100 * US, 1400 * US)
    b.host("launch", 2, 1400 * US, 1480 * US)
    b.host("stage", 2, 1400 * US, 1480 * US)
    assert split(b) == [(1000, 1100, Cause.HOST_BOUND, "commit"), (1100, 1400, Cause.HOST_BOUND, "plan"),
                        (1400, 1480, Cause.HOST_BOUND, "launch"), (1480, 1500, *LATENCY)]


def test_a_stall_between_phases_is_outside_phases_never_a_neighbours_name():
    # finalize ends, the tick hands results to its caller for 2 ms, then plan and launch
    b = two_forwards(gap_end=3500, enqueued=3490)
    b.host("finalize", 1, 800 * US, 1100 * US)
    b.host("plan", 2, 3100 * US, 3200 * US).host("launch", 2, 3200 * US, 3490 * US)
    assert split(b) == [(1000, 1100, Cause.HOST_BOUND, "finalize"), (1100, 3100, Cause.HOST_BOUND, OUTSIDE_PHASES),
                        (3100, 3200, Cause.HOST_BOUND, "plan"), (3200, 3490, Cause.HOST_BOUND, "launch"),
                        (3490, 3500, *LATENCY)]


def test_outside_phases_names_the_span_that_encloses_it():
    b = two_forwards()
    b.host("server: hand-off", 2, 1100 * US, 1300 * US, thread="server")
    assert split(b) == [(1000, 1100, Cause.HOST_BOUND, OUTSIDE_PHASES),
                        (1100, 1300, Cause.HOST_BOUND, f"{OUTSIDE_PHASES} (in server: hand-off)"),
                        (1300, 1490, Cause.HOST_BOUND, OUTSIDE_PHASES), (1490, 1500, *LATENCY)]


# -- rule 1: the host's lateness comes before a copy wait -------------------------------------

def test_an_op_queued_before_the_gap_was_not_held_up_by_the_host():
    b = two_forwards(enqueued=500)
    b.host("plan", 2, 900 * US, 1400 * US)
    b.wait("sync", 900 * US, 1200 * US, expected=False, site=SITE, step=2)
    assert split(b) == [(1000, 1500, *LATENCY)]


def test_masked_sample_waiting_for_its_mask_upload_is_a_copy_wait():
    b = TraceBuilder()
    b.compute("forward", 2, 0, 1000 * US, enqueued=0)
    b.compute("masked_sample", 2, 1405 * US, 1600 * US, enqueued=900 * US)
    b.copy("mask_upload", 2, 900 * US, 1400 * US, enqueued=900 * US)
    b.step(2)
    assert split(b) == [(1000, 1405, Cause.COPY_WAIT, "mask_upload")]


def test_a_copy_wait_starts_only_when_the_host_has_enqueued_the_op():
    def trace(upload_end: int):
        b = TraceBuilder()
        b.compute("forward", 2, 0, 1000 * US, enqueued=0)
        b.compute("masked_sample", 2, 1305 * US, 1500 * US, enqueued=1200 * US)
        b.copy("mask_upload", 2, 1100 * US, upload_end * US, enqueued=1100 * US)
        b.host("finalize", 2, 900 * US, 1200 * US)
        return b.step(2)
    assert split(trace(1300)) == [(1000, 1200, Cause.HOST_BOUND, "finalize"),
                                  (1200, 1305, Cause.COPY_WAIT, "mask_upload")]
    assert split(trace(1150)) == [(1000, 1200, Cause.HOST_BOUND, "finalize"), (1200, 1305, *LATENCY)]


def test_a_slow_finalize_is_the_finalize_not_the_mask_copy_enqueued_with_the_sample():
    # finalize (mask build) runs 2 ms past the forward; the upload and the masked sample
    # leave in the same flush at its end, and the sample waits 40 µs more for the upload
    b = TraceBuilder()
    b.compute("forward", 2, 0, 1000 * US, enqueued=0)
    b.host("finalize", 2, 500 * US, 3000 * US).host("mask_build", 2, 520 * US, 2990 * US)
    b.copy("mask_upload", 2, 3005 * US, 3040 * US, enqueued=3000 * US)
    b.compute("masked_sample", 2, 3045 * US, 3200 * US, enqueued=3000 * US)
    bubbles = find_bubbles(b.step(2).build(), WINDOW)
    # the upload starts 5 µs after it is queued (the device's own start, no excess measured), then 40 µs of copy
    assert parts(bubbles) == [(1000, 3000, Cause.HOST_BOUND, "finalize"), (3000, 3005, *LATENCY),
                              (3005, 3045, Cause.COPY_WAIT, "mask_upload")]
    assert bubbles[0].duration_ns / sum(x.duration_ns for x in bubbles) > 0.95


def test_a_device_that_ran_dry_starts_late_because_of_the_host_beyond_its_own_latency():
    # forward(1) was queued behind sample(0): the device's own latency before a step's first op
    # is 30 µs (and between a step's ops too: sample(1) after forward(1)). Step 2's forward comes
    # late (plan, then launch) and starts 100 µs after its enqueue: 70 µs of that is the cost of
    # running dry, charged to the gap's largest host cause.
    b = TraceBuilder()
    b.compute("sample", 0, 0, 100 * US, enqueued=0).compute("forward", 1, 130 * US, 1000 * US, enqueued=0)
    b.compute("sample", 1, 1030 * US, 1100 * US, enqueued=0)
    b.host("plan", 2, 900 * US, 1400 * US).host("launch", 2, 1400 * US, 1450 * US)
    b.compute("forward", 2, 1550 * US, 2500 * US, enqueued=1450 * US).step(0).step(1).step(2)
    assert split(b) == [(100, 130, *LATENCY), (1000, 1030, *LATENCY), (1100, 1400, Cause.HOST_BOUND, "plan"),
                        (1400, 1450, Cause.HOST_BOUND, "launch"), (1450, 1520, Cause.HOST_BOUND, "plan"),
                        (1520, 1550, *LATENCY)]


def queued_steps(start_us: int, within_us: int) -> TraceBuilder:
    """Three steps of forward + sample, every op queued in time: ``start_us`` before each step's
    forward, ``within_us`` before its sample."""
    b, t = TraceBuilder(), 0
    for step in (1, 2, 3):
        t += start_us
        b.compute("forward", step, t * US, (t + 500) * US, enqueued=0)
        t += 500 + within_us
        b.compute("sample", step, t * US, (t + 100) * US, enqueued=0)
        t += 100
        b.step(step)
    return b


def test_a_step_start_s_launch_latency_is_measured_apart_from_the_latency_between_its_ops():
    # A device that sets each step up (the host-process device: 65-145 µs before a step's
    # first op, ~5 µs between its ops): one median over both gaps would say 5 µs, and a late
    # step start's own 150 µs here would be charged to the host.
    b = queued_steps(start_us=150, within_us=5)
    rep = analyze(b.build(), window=WINDOW)
    assert rep.queued_gap_ns == 150 * US
    b.host("plan", 4, 1900 * US, 2600 * US)
    b.compute("forward", 4, 2800 * US, 3300 * US, enqueued=2600 * US).step(4)
    got = split(b)
    assert got[-2:] == [(2265, 2650, Cause.HOST_BOUND, "plan"), (2650, 2800, *LATENCY)]


def test_where_no_step_started_queued_its_latency_is_the_quickest_start_from_idle():
    # Every step's forward is late (a sync in every step), after an idle shorter than the
    # sample before it: the device's own step-start latency is the 10th percentile of how long
    # after its enqueue a step's first op started (leaving out slower wake-ups), not the 5 µs
    # between a step's ops.
    b, t = TraceBuilder(), 0
    starts = [120, 400, 130, 125, 500, 140, 135, 128, 122, 600, 126, 131]   # from enqueue, µs
    for step, start in enumerate(starts, 1):
        b.compute("forward", step, (t + 300 + start) * US, (t + 800 + start) * US, enqueued=(t + 300) * US)
        b.compute("sample", step, (t + 805 + start) * US, (t + 1805 + start) * US, enqueued=(t + 300) * US)
        b.host("plan", step, (t + 10) * US, (t + 300) * US).step(step)
        t += 1805 + start
    rep = analyze(b.build(), window=(0, t * US))
    after = starts[1:]                       # the first step's start follows no op: no gap
    assert rep.queued_gap_ns == sorted(after)[len(after) // 10] * US == 125 * US
    slow = [p for p in split(b, window=(0, t * US)) if p[2:] == LATENCY and p[1] - p[0] > 10]
    assert {p[1] - p[0] for p in slow} == {122, 125}   # a slower start's excess is the host's (plan)


def test_a_late_start_after_a_long_idle_does_not_measure_the_device_s_own_latency():
    # The same steps with 5 ms of plan: the device idled longer than the op before it ran (a
    # host-process worker goes to sleep), so its starts measure its wake-up, the lateness's
    # cost: without a queued step start, the latency between a step's ops (5 µs) stands in.
    b, t = TraceBuilder(), 0
    for step in range(1, 6):
        b.compute("forward", step, (t + 5300) * US, (t + 5800) * US, enqueued=(t + 5000) * US)
        b.compute("sample", step, (t + 5805) * US, (t + 6805) * US, enqueued=(t + 5000) * US)
        b.host("plan", step, (t + 10) * US, (t + 5000) * US).step(step)
        t += 6805
    assert analyze(b.build(), window=(0, t * US)).queued_gap_ns == 5 * US


# -- a sync's cost carries over the gaps it leaves until the host is ahead again ----------------

def test_a_carried_charge_beside_a_second_wait_of_the_site_does_not_count_as_that_wait_s_own():
    # W1 [50, 200) leaves 45 µs of its cost for the next gap (its 150 µs: 100 inside gap 1, 5 of
    # plan after it); in gap 2 the carry takes plan [320, 365), then W2 [250, 320) is charged its
    # own 20 µs inside the gap plus 50 µs of host work after the carry: [365, 415)
    b = TraceBuilder()
    b.compute("forward", 1, 0, 100 * US, enqueued=0)
    b.compute("forward", 2, 210 * US, 300 * US, enqueued=205 * US)
    b.compute("forward", 3, 500 * US, 550 * US, enqueued=495 * US)
    b.wait("sync", 50 * US, 200 * US, expected=False, site=SITE, step=1)
    b.wait("sync", 250 * US, 320 * US, expected=False, site=SITE, step=2)
    b.host("plan", 2, 200 * US, 250 * US).host("plan", 3, 320 * US, 400 * US)
    got = split(b.step(1).step(2).step(3))
    assert [p for p in got if p[0] >= 300] == [(300, 415, Cause.ACCIDENTAL_SYNC, SITE),
                                               (415, 495, Cause.HOST_BOUND, OUTSIDE_PHASES), (495, 500, *LATENCY)]


def sync_then_catch_up(lead_us: int) -> TraceBuilder:
    """Step 2's mask upload drains the device (210 µs wait); step 3's forward is enqueued
    ``lead_us`` before masked_sample(2) ends; step 3's sample then comes late."""
    b = TraceBuilder()
    b.compute("forward", 2, 0, 1000 * US, enqueued=0)
    b.wait("mask upload: drain (sync)", 800 * US, 1010 * US, expected=False, site=SITE, step=2)
    b.compute("masked_sample", 2, 1100 * US, 1300 * US, enqueued=1090 * US)        # gap 1: the sync
    b.compute("forward", 3, 1300 * US, 2300 * US, enqueued=(1300 - lead_us) * US)
    b.host("launch", 3, 2000 * US, 2400 * US)
    b.compute("sample", 3, 2400 * US, 2500 * US, enqueued=2390 * US)               # gap 2
    return b.step(2).step(3)


def test_what_a_sync_did_not_cost_in_its_gap_it_costs_in_the_next_while_the_host_is_behind():
    # 210 µs lost: 90 in gap 1's host-late part, the other 120 in gap 2's (90) and gap 3's (30)
    b = sync_then_catch_up(lead_us=5)
    b.compute("forward", 4, 2600 * US, 2700 * US, enqueued=2590 * US)
    b.step(4)
    assert split(b) == [
        (1000, 1090, Cause.ACCIDENTAL_SYNC, SITE), (1090, 1100, *LATENCY),
        (2300, 2390, Cause.ACCIDENTAL_SYNC, SITE), (2390, 2400, *LATENCY),
        (2500, 2530, Cause.ACCIDENTAL_SYNC, SITE), (2530, 2590, Cause.HOST_BOUND, OUTSIDE_PHASES),
        (2590, 2600, *LATENCY)]


def test_once_the_host_is_ahead_again_later_gaps_are_its_own():
    assert split(sync_then_catch_up(lead_us=100)) == [
        (1000, 1090, Cause.ACCIDENTAL_SYNC, SITE), (1090, 1100, *LATENCY),
        (2300, 2390, Cause.HOST_BOUND, "launch"), (2390, 2400, *LATENCY)]


def test_a_sync_costs_the_next_gaps_no_more_than_the_time_it_lost():
    b = TraceBuilder()
    b.compute("forward", 2, 0, 1000 * US, enqueued=0)
    b.wait("drain", 880 * US, 1000 * US, expected=False, site=SITE, step=2)   # 120 µs lost
    b.compute("sample", 2, 1050 * US, 1100 * US, enqueued=1050 * US)
    b.compute("forward", 3, 1150 * US, 1200 * US, enqueued=1150 * US)
    b.compute("forward", 4, 1250 * US, 1300 * US, enqueued=1250 * US)
    b.compute("forward", 5, 1350 * US, 1400 * US, enqueued=1350 * US)
    b.step(2).step(3).step(4).step(5)
    assert split(b) == [(1000, 1050, Cause.ACCIDENTAL_SYNC, SITE), (1100, 1150, Cause.ACCIDENTAL_SYNC, SITE),
                        (1200, 1220, Cause.ACCIDENTAL_SYNC, SITE), (1220, 1250, Cause.HOST_BOUND, OUTSIDE_PHASES),
                        (1300, 1350, Cause.HOST_BOUND, OUTSIDE_PHASES)]


def test_bubbles_are_clipped_to_the_window():
    b = two_forwards()
    assert split(b, (1200 * US, 2000 * US)) == [(1200, 1490, Cause.HOST_BOUND, OUTSIDE_PHASES), (1490, 1500, *LATENCY)]
