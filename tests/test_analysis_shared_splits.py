"""The check's one pass over the gaps gives what the whole-run pass and ``analyze``'s give apart.

``shared_splits`` serves the window's splits from the whole run's once the two passes' states
meet (``Attribution.same_course``); everything rests on a split depending on nothing else.
"""
from __future__ import annotations

from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st
from test_analysis_vectorised import SETTINGS, both, traces

from helpers.scale_traces import write_own_trace
from photon_trace.telemetry.analysis.attribution import Attribution
from photon_trace.telemetry.analysis.bubble_table import Bubbles
from photon_trace.telemetry.analysis.bubbles import Cause, device_gaps, find_bubbles, split_table
from photon_trace.telemetry.analysis.shared_splits import shared_splits
from photon_trace.telemetry.analysis.split_table import SplitTable
from photon_trace.telemetry.analysis.window import compute_extent, steady_state_window
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, StepRecord, Trace

DATA = Path(__file__).resolve().parent / "data"


def _bubbles(b: Bubbles) -> tuple:
    return b.t0.tolist(), b.t1.tolist(), b.step.tolist(), b.row.tolist(), b.rows


def _table(t: SplitTable) -> tuple:
    sparse = lambda d: [(k, i.tolist(), v.tolist()) for k, (i, v) in d.items()]   # noqa: E731
    return (t.inside.tolist(), t.full.tolist(), t.late.tolist(), t.regained.tolist(), t.tail.tolist(),
            t.launch.tolist(), sparse(t.chain), sparse(t.device), list(t.shared.items()))


def test_our_trace_is_split_once_with_the_same_answers(tmp_path):
    """Our own trace carries the mask upload's charge through every gap: the window's pass,
    started without it, meets the whole run's after a few gaps."""
    trace = load_any(write_own_trace(tmp_path / "own.trace.jsonl.gz", 6000).path)
    window = steady_state_window(trace)
    assert window != compute_extent(trace)
    got = shared_splits(trace, window)
    assert got is not None
    table, bubbles, launch = split_table(trace, device_gaps(trace, window))
    assert _table(got.table) == _table(table) and _bubbles(got.bubbles) == _bubbles(bubbles)
    assert got.launch == launch
    syncs = find_bubbles(trace, compute_extent(trace), cause=Cause.ACCIDENTAL_SYNC)
    assert len(syncs) and _bubbles(got.syncs) == _bubbles(syncs)


def test_nothing_is_shared_where_the_launch_latencies_differ():
    trace = load_any(DATA / "golden" / "mask-sync-pipelined.trace.jsonl")
    assert shared_splits(trace, steady_state_window(trace)) is None


def _ours(ops: list[tuple[int, int, int, int]], phases: list[tuple[str, int, int]], wait: tuple[int, int]) -> Trace:
    """Compute ops (t0, t1, enqueued, step), host phases (name, t0, t1), one unexpected wait."""
    return Trace({"version": 2, "clock": {"device_error_ns": 0}},
                 [HostSpan(name, 0, 0, t0, t1, "main", -1, -1) for name, t0, t1 in phases],
                 [DeviceSpan("compute", "forward", step, 0, t0, t1, e) for t0, t1, e, step in ops],
                 [HostWait("wait", False, *wait, "a.py:1", 0, -1, -1)],
                 [StepRecord(s, "decode", 0, 1, 0, 0, 1) for s in range(2)], [])


# The sync charged in the first gap still carries its charge at the third, in the pass over every gap
CARRIED = _ours([(1000, 1100, 1000, 0), (1300, 1400, 1150, 0), (1700, 1800, 1420, 1), (2100, 2200, 2090, 1)],
                [("launch", 1105, 1150), ("plan", 1400, 1420), ("launch", 1800, 2090)], (0, 1105))
# The first gap charges a wait that reaches the third; the second regains the lead (no carry) and
# has no host-late part, so a pass that skipped the first has the same carry and last enqueue
CHARGED = _ours([(0, 100, 0, 0), (300, 400, 150, 0), (400, 500, 380, 1), (600, 700, 450, 1), (900, 1000, 890, 1)],
                [("launch", 800, 890)], (120, 800))


@SETTINGS
@given(traces(), st.lists(st.booleans(), max_size=14), st.integers(0, 40))
@example(CARRIED, [True], 20)
@example(CHARGED, [True], 5)
def test_a_pass_that_meets_another_splits_every_later_gap_as_it_does(trace, skipped, min_gap):
    """A pass that skipped some gaps (its state unlike the other's: another carry, another last
    enqueue, other waits charged), once in the same course as the pass over every gap, splits
    each later gap as that pass does."""
    for tr in both(trace):
        gaps = device_gaps(tr, compute_extent(tr))
        big = [g for g in gaps if g.full_ns >= min_gap]
        run = Attribution(tr, tr.header["clock"]["device_error_ns"], min_gap)
        run.launch = run.launch_latency(gaps)
        late = run.fresh()
        met = False
        for i, g in enumerate(big):
            skip = not met and i < len(skipped) and skipped[i]
            met = met or (not skip and late.same_course(run, g.prev.t1))
            s = run.split(g.prev, g.next)
            if not skip:
                assert (late.split(g.prev, g.next) == s) or not met
