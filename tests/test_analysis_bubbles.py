"""Bubble detection and causes on hand-built traces with exact timings (µs)."""
from __future__ import annotations

from photon_trace.telemetry.analysis import (
    ACCIDENTAL_SYNC, COMMIT_WAIT, COPY_WAIT, HOST_BOUND, Bubble, analyze, busy_intervals, device_gaps,
    find_bubbles, DISPATCH)
from helpers.sites import COMMIT_SITE as COMMIT, ITEM_SITE as SITE
from helpers.trace_builder import US, TraceBuilder

WINDOW = (0, 10_000 * US)


def two_forwards(gap_start=1000, gap_end=1500, enqueued=1490, **settings) -> TraceBuilder:
    """forward(1) on [0, gap_start), forward(2) from gap_end, enqueued at ``enqueued`` (all µs)."""
    b = TraceBuilder(**settings)
    b.compute("forward", 1, 0, gap_start * US, enqueued=0)
    b.compute("forward", 2, gap_end * US, (gap_end + 1000) * US, enqueued=enqueued * US)
    return b.step(1).step(2)


def only(bubbles: list[Bubble]) -> Bubble:
    assert len(bubbles) == 1, bubbles
    return bubbles[0]


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
    tr = b.build()
    assert [(x.t0, x.duration_ns) for x in find_bubbles(tr, WINDOW)] == [(200 * US, 20 * US)]
    rep = analyze(tr, (0, 300 * US))
    assert rep.idle_ns == 39 * US and rep.bubble_ns == 20 * US and rep.dispatch_ns == 19 * US
    assert rep.busy_ns + rep.idle_ns == rep.window_ns


def test_unexpected_wait_overlapping_the_gap_is_an_accidental_sync_at_its_site():
    b = two_forwards()
    b.host("commit", 1, 800 * US, 1400 * US).host("launch", 2, 1400 * US, 1490 * US)
    b.wait("host read of a device value", 900 * US, 1010 * US, expected=False, site=SITE, step=1)
    assert only(find_bubbles(b.build(), WINDOW)) == Bubble(1000 * US, 1500 * US, 500 * US, 2,
                                                           ACCIDENTAL_SYNC, SITE)


def test_a_drain_wait_ending_exactly_as_the_gap_opens_still_counts():
    b = two_forwards()
    b.wait("mask upload: drain (sync)", 900 * US, 1000 * US, expected=False, site=SITE, step=2)
    assert only(find_bubbles(b.build(), WINDOW)).cause == ACCIDENTAL_SYNC


def test_slack_absorbs_the_device_clock_error():
    b = two_forwards()
    b.wait("sync", 900 * US, 995 * US, expected=False, site=SITE, step=1)
    assert only(find_bubbles(b.build(), WINDOW)).cause == HOST_BOUND
    b.header["clock"]["device_error_ns"] = 10 * US
    assert only(find_bubbles(b.build(), WINDOW)).cause == ACCIDENTAL_SYNC


def test_a_zero_length_wait_blocks_nothing():
    b = two_forwards()
    b.host("plan", 2, 1000 * US, 1490 * US)
    b.wait("sync", 1200 * US, 1200 * US, expected=False, site=SITE, step=2)
    assert only(find_bubbles(b.build(), WINDOW))[4:6] == (HOST_BOUND, "plan")


def test_expected_wait_on_the_step_just_finished_is_a_commit_wait():
    b = two_forwards(depth=1)
    b.host("commit", 1, 700 * US, 1300 * US).host("plan", 2, 1300 * US, 1400 * US)
    b.wait("commit: copy-back", 710 * US, 1040 * US, expected=True, site=COMMIT, step=1)
    assert only(find_bubbles(b.build(), WINDOW))[4:6] == (COMMIT_WAIT, COMMIT)


def test_expected_wait_on_an_older_step_does_not_explain_the_gap():
    # Pipelined: commit(0) waits for step 0's copy, which lands just after forward(1) ends.
    b = two_forwards()
    b.host("commit", 0, 700 * US, 1300 * US).host("plan", 2, 1300 * US, 1400 * US)
    b.wait("commit: copy-back", 710 * US, 1040 * US, expected=True, site=COMMIT, step=0)
    assert only(find_bubbles(b.build(), WINDOW))[4:6] == (HOST_BOUND, "commit")


def test_host_bound_detail_is_the_phase_covering_most_of_the_gap_before_the_enqueue():
    b = two_forwards(enqueued=1480)
    b.host("commit", 1, 900 * US, 1100 * US).host("plan", 2, 1100 * US, 1400 * US)
    b.host("launch", 2, 1400 * US, 1480 * US)
    b.host("stage", 2, 1400 * US, 1480 * US)  # a sub-phase never competes with its phase
    assert only(find_bubbles(b.build(), WINDOW)) == Bubble(1000 * US, 1500 * US, 500 * US, 2, HOST_BOUND, "plan")


def test_host_bound_without_any_phase_is_other():
    assert only(find_bubbles(two_forwards().build(), WINDOW))[4:6] == (HOST_BOUND, "other")


def test_an_op_queued_before_the_gap_was_not_held_up_by_the_host():
    b = two_forwards(enqueued=500)
    b.host("plan", 2, 900 * US, 1400 * US)
    b.wait("sync", 900 * US, 1200 * US, expected=False, site=SITE, step=2)
    assert only(find_bubbles(b.build(), WINDOW))[4] == DISPATCH


def test_masked_sample_waiting_for_its_mask_upload_is_a_copy_wait():
    b = TraceBuilder()
    b.compute("forward", 2, 0, 1000 * US, enqueued=0)
    b.compute("masked_sample", 2, 1405 * US, 1600 * US, enqueued=900 * US)
    b.copy("mask_upload", 2, 900 * US, 1400 * US, enqueued=900 * US)
    b.step(2)
    assert only(find_bubbles(b.build(), WINDOW)) == Bubble(1000 * US, 1405 * US, 405 * US, 2, COPY_WAIT,
                                                           "mask_upload")


def test_copy_wait_needs_the_copy_to_end_after_the_host_enqueued():
    def trace(upload_end: int):
        b = TraceBuilder()
        b.compute("forward", 2, 0, 1000 * US, enqueued=0)
        b.compute("masked_sample", 2, 1305 * US, 1500 * US, enqueued=1200 * US)
        b.copy("mask_upload", 2, 1000 * US, upload_end * US, enqueued=1000 * US)
        b.host("finalize", 2, 900 * US, 1200 * US)
        return b.step(2).build()
    assert only(find_bubbles(trace(1300), WINDOW))[4:6] == (COPY_WAIT, "mask_upload")
    assert only(find_bubbles(trace(1100), WINDOW))[4:6] == (HOST_BOUND, "finalize")


def sync_then_catch_up(lead_us: int) -> TraceBuilder:
    """Step 2's mask upload drains the device; step 3's forward is enqueued ``lead_us`` before
    masked_sample(2) ends; step 3's sample then comes late."""
    b = TraceBuilder()
    b.compute("forward", 2, 0, 1000 * US, enqueued=0)
    b.wait("mask upload: drain (sync)", 800 * US, 1010 * US, expected=False, site=SITE, step=2)
    b.compute("masked_sample", 2, 1100 * US, 1300 * US, enqueued=1090 * US)        # bubble 1: the sync
    b.compute("forward", 3, 1300 * US, 2300 * US, enqueued=(1300 - lead_us) * US)
    b.host("launch", 3, 2000 * US, 2400 * US)
    b.compute("sample", 3, 2400 * US, 2500 * US, enqueued=2390 * US)               # bubble 2
    return b.step(2).step(3)


def test_the_host_work_after_a_sync_that_it_never_caught_up_on_is_the_syncs_cost():
    bubbles = find_bubbles(sync_then_catch_up(lead_us=5).build(), WINDOW)
    assert [(x.step, x.cause, x.detail) for x in bubbles] == [(2, ACCIDENTAL_SYNC, SITE), (3, ACCIDENTAL_SYNC, SITE)]


def test_once_the_host_is_ahead_again_later_gaps_are_its_own():
    bubbles = find_bubbles(sync_then_catch_up(lead_us=100).build(), WINDOW)
    assert [(x.step, x.cause, x.detail) for x in bubbles] == [(2, ACCIDENTAL_SYNC, SITE), (3, HOST_BOUND, "launch")]


def test_inheritance_stops_after_the_step_following_the_sync():
    b = sync_then_catch_up(lead_us=5)
    b.compute("forward", 4, 2600 * US, 2700 * US, enqueued=2590 * US)   # still just in time...
    b.compute("forward", 5, 2800 * US, 2900 * US, enqueued=2790 * US)   # ...but two steps on
    b.host("plan", 5, 2700 * US, 2790 * US).step(4).step(5)
    causes = [(x.step, x.cause) for x in find_bubbles(b.build(), WINDOW)]
    assert causes == [(2, ACCIDENTAL_SYNC), (3, ACCIDENTAL_SYNC), (4, ACCIDENTAL_SYNC), (5, HOST_BOUND)]


def test_blocking_stage_gap_after_the_commit_wait_is_part_of_it():
    b = TraceBuilder(depth=1)
    b.compute("sample", 1, 0, 1000 * US)
    b.wait("commit: copy-back", 500 * US, 1050 * US, expected=True, site=COMMIT, step=1)
    b.compute("stage", 2, 1300 * US, 1320 * US, enqueued=1300 * US)
    b.compute("forward", 2, 1400 * US, 2000 * US, enqueued=1400 * US)
    b.host("launch", 2, 1250 * US, 1450 * US).step(1).step(2)
    assert [(x.step, x.cause) for x in find_bubbles(b.build(), WINDOW)] == [(2, COMMIT_WAIT), (2, COMMIT_WAIT)]


def test_bubbles_are_clipped_to_the_window():
    b = two_forwards()
    (x,) = find_bubbles(b.build(), (1200 * US, 2000 * US))
    assert (x.t0, x.t1, x.duration_ns) == (1200 * US, 1500 * US, 300 * US)
