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
