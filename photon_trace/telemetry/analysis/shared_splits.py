"""The check's two passes over the gaps made as one: the whole run's syncs and the window's splits.

``check`` split the gaps twice: the sync gate's pass over the whole run (``whole_run``: the
syncs' bubbles over the compute extent) and ``analyze``'s over the steady-state window, each
from a fresh ``Attribution``. The whole-run pass passes over a gap no sync can reach
(``Attribution.passed_syncless``), but on our own trace none is: the mask upload's charge is
carried from gap to gap until the host regains its lead (102 times in the 194k gaps of a
million-span trace), so every window gap was split twice, half of the check's time.

A split depends only on the gap and the attribution's state: its launch latency, the charge
carried, the last gap's enqueue and the waits charged already. The window's gaps are a run of
the whole run's, so once the window's own pass, started fresh at its first gap, reaches a gap
in the same state as the whole run's pass (``Attribution.same_course``: a few gaps, until both
carry the same charge), every later split is the same and the whole run's serves both. Before
that each pass goes its own way, the whole run's passing over the gaps no sync reaches. Where
the two launch latencies differ (each measured over its own gaps) the states never meet:
nothing is shared (``None``), and the caller makes the two passes apart.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis import carried_pass
from photon_trace.telemetry.analysis.attribution import Attribution, GapSplit
from photon_trace.telemetry.analysis.bubble_table import BubbleColumns, Bubbles
from photon_trace.telemetry.analysis.bubbles import MIN_BUBBLE_NS, Gap, device_gaps
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.clock import clock_error_ns
from photon_trace.telemetry.analysis.gaps import Ops
from photon_trace.telemetry.analysis.launch_latency import LaunchLatency
from photon_trace.telemetry.analysis.split_table import SplitTable
from photon_trace.telemetry.analysis.window import compute_extent
from photon_trace.telemetry.trace.records import Trace


class Shared(NamedTuple):
    """Both passes' answers: ``syncs`` as ``find_bubbles`` over the compute extent with ``cause``
    ``accidental_sync``; ``table``, ``bubbles``, ``launch`` as ``bubbles.split_table`` over the window."""
    syncs: Bubbles
    table: SplitTable
    bubbles: Bubbles
    launch: LaunchLatency


def shared_splits(trace: Trace, window: tuple[int, int], *, min_gap_ns: int = MIN_BUBBLE_NS,
                  slack_ns: int | None = None) -> Shared | None:
    """The whole run's syncs and the window's splits in one pass over the whole run's gaps; None
    where the two passes' launch latencies differ, or the window's gaps are not a run of the
    whole run's."""
    ops = Ops(trace)
    every, mine = device_gaps(trace, compute_extent(trace), ops), device_gaps(trace, window, ops)
    if slack_ns is None:
        slack_ns = min(clock_error_ns(trace.header), min_gap_ns)
    run = Attribution(trace, slack_ns, min_gap_ns)
    own = run.fresh()
    run.launch, own.launch = run.launch_latency(every), own.launch_latency(mine)
    if run.launch != own.launch:
        return None
    big, inside = every.take(every.full_ns >= min_gap_ns), mine.take(mine.full_ns >= min_gap_ns)
    first = int(np.searchsorted(big.next, inside.next[0])) if len(inside) else 0
    end = first + len(inside)
    # the same gaps (ops on both sides, length) in the same order, clipped to the window instead
    if end > len(big) or not (np.array_equal(big.next[first:end], inside.next)
                              and np.array_equal(big.prev[first:end], inside.prev)
                              and np.array_equal(big.full_ns[first:end], inside.full_ns)):
        return None
    waited = run.copy_waits(big).tolist()     # a gap's own: the same in either pass
    lo, hi = inside.t0.tolist(), inside.t1.tolist()
    syncs, table, bubbles = BubbleColumns(), SplitTable(), BubbleColumns()
    sync = Cause.ACCIDENTAL_SYNC
    alone: Attribution | None = own     # the window's own pass, until it meets the whole run's

    def add_syncs(g: Gap, s: GapSplit) -> None:     # ``bubbles_of`` the sync's parts alone
        for t0, t1, cause, detail in s.parts:
            if cause == sync:
                a, b = max(t0, g.t0), min(t1, g.t1)
                if a < b:
                    syncs.add(a, b, g.next.step, cause, detail)

    def split(i: int, g: Gap, w: bool) -> None:    # one gap, in time order: each pass's split and reading
        nonlocal alone
        if first <= i < end:
            if alone is not None and alone.same_course(run, g.prev.t1):
                alone = None
            clipped = Gap(lo[i - first], hi[i - first], g.prev, g.next, g.full_ns)
            s = alone.split(g.prev, g.next, w) if alone is not None else run.split(g.prev, g.next, w)
            table.add(clipped, s)
            bubbles.add_parts(s.parts, clipped.t0, clipped.t1, g.next.step)
            if alone is None:
                add_syncs(g, s)
                return
        # the whole run's own pass: a gap no sync can reach is passed over (the state as its split leaves it)
        if not run.passed_syncless(g.prev, g.next):
            add_syncs(g, run.split(g.prev, g.next, w))

    fast = carried_pass.applies(run)    # the carried lane a block at a time (``carried_pass``)

    def run_only(a: int, b: int) -> None:     # gaps outside the window: the whole run's pass alone
        if not fast or b - a < 2:
            for i, (g, w) in enumerate(zip(big[a:b], waited[a:b]), start=a):
                split(i, g, w)
            return
        split(a, big[a], waited[a])
        carried_pass.window_pass(run, big, a + 1, b, None, first, waited, None, None, syncs)

    def few_at_a_time(a: int, b: int, n: int = 64):     # the passes meet within a few gaps: records for
        for c in range(a, b, n):                          # those, not for a block of thousands
            yield from enumerate(zip(big[c:min(c + n, b)], waited[c:min(c + n, b)]), start=c)

    run_only(0, first)
    i = first - 1
    for i, (g, w) in few_at_a_time(first, end):
        split(i, g, w)
        if fast and alone is None:
            break       # one split serves both passes from here: the window's rest a block at a time
    if fast and alone is None and i < end - 1:
        carried_pass.window_pass(run, big, i + 1, end, inside, first, waited, table, bubbles, syncs)
    run_only(end, len(big))
    return Shared(syncs.done(), table, bubbles.done(), own.launch)
