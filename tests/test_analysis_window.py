"""The steady-state window rule: skip the batch filling and warm-up, cut the drain."""
from __future__ import annotations

from photon_trace.telemetry.analysis import analyze, steady_state_window
from helpers.trace_builder import US, TraceBuilder, pipelined_trace
from photon_trace.telemetry.analysis.window import compute_extent, step_starts


def run(live_rows: list[int], kinds: list[str] | None = None, zombies: list[int] | None = None):
    """One step per entry, 1 ms apart, step i's forward at i ms."""
    b = TraceBuilder()
    kinds = kinds or ["decode"] * len(live_rows)
    zombies = zombies or [0] * len(live_rows)
    for i, (live, kind, z) in enumerate(zip(live_rows, kinds, zombies)):
        b.compute("prefill" if kind == "prefill" else "forward", i, i * 1000 * US, i * 1000 * US + 900 * US)
        b.step(i, kind=kind, rows=live + z, zombie_rows=z)
    return b.build()


def start(i: int) -> int:
    return i * 1000 * US


def test_warm_up_skips_the_filling_steps_then_two_more():
    tr = run([2, 4, 8, 8] + [8] * 30, kinds=["prefill", "mixed", "mixed"] + ["decode"] * 31)
    # first decode step at full batch: 3; skip max(2, ceil(0.05 * 34)) = 2 more
    assert steady_state_window(tr)[0] == start(5)


def test_warm_up_skip_grows_with_long_runs():
    tr = run([8] * 100)
    assert steady_state_window(tr)[0] == start(5)   # ceil(0.05 * 100) = 5


def test_drain_is_cut_where_the_live_batch_falls_below_its_typical_size():
    tr = run([8] * 30 + [7, 5, 2, 0], zombies=[0] * 30 + [1, 2, 3, 2])
    # the last full step is 29; the window ends where step 30 starts
    assert steady_state_window(tr) == (start(2), start(30))


def test_the_final_step_has_no_period_so_it_is_never_in_the_window():
    tr = run([1] * 20)
    assert steady_state_window(tr) == (start(2), start(19))


def test_empty_steps_at_the_end_do_not_lower_the_typical_batch():
    tr = run([4] * 20 + [0] * 60)
    assert steady_state_window(tr) == (start(4), start(20))   # ceil(0.05 * 80) = 4


def test_a_too_short_trace_falls_back_to_the_whole_compute_extent():
    tr = run([1, 1])
    assert steady_state_window(tr) == compute_extent(tr) == (0, start(1) + 900 * US)


def test_no_compute_ops_gives_an_empty_window():
    assert steady_state_window(TraceBuilder().build()) == (0, 0)


def test_every_step_in_the_window_has_a_complete_period():
    tr = pipelined_trace(streams=4, tokens=30)
    w0, w1 = steady_state_window(tr)
    rep = analyze(tr)
    starts = [t for t, _ in step_starts(tr)]
    assert w0 in starts and w1 in starts
    assert sum(s.period_ns for s in rep.steps) == w1 - w0
    assert all(s.zombie_rows == 0 and s.kind == "decode" for s in rep.steps)


def test_a_step_without_a_record_counts_at_full_size_and_as_decode_unless_it_ran_a_prefill():
    """Steps 0 and 1 have no record: step 0 ran a prefill op (not decode), step 1 a forward
    (decode, live at full size), so the window's first decode step at the typical batch is 1."""
    b = TraceBuilder()
    b.compute("prefill", 0, 0, 900 * US)
    for i in range(1, 40):
        b.compute("forward", i, start(i), start(i) + 900 * US)
        if i >= 2:
            b.step(i, rows=8)
    assert steady_state_window(b.build())[0] == start(1 + 2)   # ceil(0.05 * 40) = 2 skipped after it


def test_the_last_record_of_a_step_number_is_the_one_read():
    """Step 30, the last full one, is recorded twice, full then drained: the later record is the
    one read, so the drain is cut a step earlier; in a trace held as lists and as columns alike."""
    from dataclasses import replace

    from photon_trace.telemetry.trace.columns import Columns
    from photon_trace.telemetry.trace.records import StepRecord

    tr = run([8] * 31 + [2] * 9)
    assert steady_state_window(tr) == (start(2), start(31))
    tr.steps.append(tr.steps[30]._replace(rows=2))
    assert steady_state_window(tr) == (start(2), start(30))
    columns = replace(tr, steps=Columns.from_records(StepRecord, tr.steps))
    assert steady_state_window(columns) == (start(2), start(30))
