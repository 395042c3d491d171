"""Device busy time, the gaps between compute ops, and the bubbles that explain them.

Busy is the union of compute-stream ops. A *gap* is the time between one
merged run of compute ops and the next. Gaps shorter than ``min_gap_ns`` are the
device's own per-command overhead (HTA's "kernel wait": a GPU's launch gap, the
host-process device's command pickup) and are reported in bulk as dispatch time;
longer ones are split into *bubbles*, each a stretch of the gap with one cause:
what covered it (a wait, a host phase, nothing the engine recorded, a copy, the
device's own latency). A gap with several causes gives several bubbles, adjacent
and adding up to the gap; ``attribution`` has the rules.

"Compute" is the trace's primary stream (``trace.lanes.primary_stream``) and "copy" any other:
in an imported trace the op the device waited for may be on any stream (an NCCL or a
side stream); the cause is then ``stream_wait``. The host phases are ``trace.lanes.host_phases``.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from photon_trace.telemetry.analysis.attribution import (
    LAUNCH_LATENCY, OUTSIDE_PHASES, Attribution, GapSplit, LaunchLatency)
from photon_trace.telemetry.analysis.bubble_table import Bubble, BubbleColumns, Bubbles
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.clock import clock_error_ns
from photon_trace.telemetry.analysis.gaps import Gap, Gaps, Ops, gaps_between
from photon_trace.telemetry.analysis.runs import Runs
from photon_trace.telemetry.analysis.split_table import SplitTable
from photon_trace.telemetry.trace.records import Trace

__all__ = ["Gap", "Gaps", "Runs", "Bubble", "busy_intervals", "device_gaps", "split_gaps", "iter_splits", "split_table", "Splits", "bubbles_of", "classify",
           "find_bubbles",
           "MIN_BUBBLE_NS", "GapSplit", "Cause", "OUTSIDE_PHASES", "LAUNCH_LATENCY"]

MIN_BUBBLE_NS = 20_000
"""Gaps under 20 µs are dispatch overhead, not bubbles: the host-process device
takes tens of µs per command and a GPU a few µs per kernel launch."""


def busy_intervals(trace: Trace, window: tuple[int, int], ops: Ops | None = None) -> Runs:
    """The union of compute ops as disjoint ``(t0, t1)`` runs, clipped to ``window``
    (``ops``: the trace's compute ops, when the caller has them already)."""
    w0, w1 = window
    ops = Ops(trace) if ops is None else ops
    a, b = np.maximum(ops.t0, w0), np.minimum(ops.t1, w1)
    keep = a < b
    return Runs.of(a[keep], b[keep])


def device_gaps(trace: Trace, window: tuple[int, int], ops: Ops | None = None) -> Gaps:
    """Every gap between consecutive compute ops that lies (partly) in ``window``."""
    return gaps_between(Ops(trace) if ops is None else ops, window)


class Splits(list):
    """``(Gap, GapSplit)`` per bubble-sized gap, in time order; ``launch`` is the device's own
    launch latency the trace measures (``launch.LaunchLatency``), ``launch_ns`` the one a
    step pays once (its first op's; None: no evidence)."""
    launch: LaunchLatency = LaunchLatency()
    launch_ns: int | None = None


def iter_splits(trace: Trace, gaps: Gaps, *, min_gap_ns: int = MIN_BUBBLE_NS, slack_ns: int | None = None,
                syncs_only: bool = False) -> tuple[LaunchLatency, Iterator[tuple[Gap, GapSplit]]]:
    """``split_gaps`` one gap at a time: (the launch latency, measured on ``gaps`` of every size
    before any split, and the ``(Gap, GapSplit)`` pairs in time order, made as they are read).
    A consumer that only sums the splits holds none of them: at ten million spans our own trace
    has four million bubble-sized gaps, and as a list they took gigabytes. ``syncs_only``: only
    the gaps that may hold an ``accidental_sync`` part (``Attribution.passed_syncless``), for a
    caller that counts the syncs' idle alone; their splits are the same as without it."""
    if slack_ns is None:
        slack_ns = min(clock_error_ns(trace.header), min_gap_ns)
    attribution = Attribution(trace, slack_ns, min_gap_ns)
    attribution.launch = attribution.launch_latency(gaps)
    big = gaps.take(gaps.full_ns >= min_gap_ns)     # only the bubble-sized gaps become records
    waited = attribution.copy_waits(big).tolist()
    if syncs_only:      # a gap that cannot hold a sync's part is passed over, not split
        return attribution.launch, ((g, attribution.split(g.prev, g.next, w)) for g, w in zip(big, waited)
                                    if not attribution.passed_syncless(g.prev, g.next))
    return attribution.launch, ((g, attribution.split(g.prev, g.next, w)) for g, w in zip(big, waited))


def split_gaps(trace: Trace, gaps: Gaps, *, min_gap_ns: int = MIN_BUBBLE_NS,
               slack_ns: int | None = None) -> Splits:
    """Each gap of at least ``min_gap_ns`` with its attribution (``attribution``), in time order;
    the launch latency is measured on ``gaps`` (every size)."""
    launch, pairs = iter_splits(trace, gaps, min_gap_ns=min_gap_ns, slack_ns=slack_ns)
    out = Splits(pairs)
    out.launch, out.launch_ns = launch, launch.typical
    return out


def split_table(trace: Trace, gaps: Gaps, *, min_gap_ns: int = MIN_BUBBLE_NS,
                slack_ns: int | None = None) -> tuple[SplitTable, Bubbles, LaunchLatency]:
    """``split_gaps`` read once and kept as what ``analyze`` needs of it: the ``SplitTable`` the
    diagnosis reads, the bubbles as columns (``bubble_table``), and the launch latency; no split
    is held."""
    launch, pairs = iter_splits(trace, gaps, min_gap_ns=min_gap_ns, slack_ns=slack_ns)
    table, bubbles = SplitTable(), BubbleColumns()
    for g, s in pairs:
        table.add(g, s)
        bubbles.add_parts(s.parts, g.t0, g.t1, g.next.step)     # as ``bubbles_of``, into columns
    return table, bubbles.done(), launch


def bubbles_of(gap: Gap, split: GapSplit) -> list[Bubble]:
    """The gap's parts as bubbles, clipped to the gap's part in the window."""
    out = []
    for p in split.parts:
        a, b = max(p.t0, gap.t0), min(p.t1, gap.t1)
        if a < b:
            out.append(Bubble(a, b, b - a, gap.next.step, p.cause, p.detail))
    return out


def classify(trace: Trace, gaps: Gaps, *, min_gap_ns: int = MIN_BUBBLE_NS,
             slack_ns: int | None = None, cause: Cause | None = None) -> list[Bubble] | Bubbles:
    """The bubbles of ``gaps`` (those of at least ``min_gap_ns``), in time order; of ``cause``
    only, when given, as columns (``Bubbles``: the gate's whole-run count of the syncs' idle
    holds no tuple per bubble)."""
    if cause is None:
        return [b for g, s in split_gaps(trace, gaps, min_gap_ns=min_gap_ns, slack_ns=slack_ns)
                for b in bubbles_of(g, s)]
    pairs = iter_splits(trace, gaps, min_gap_ns=min_gap_ns, slack_ns=slack_ns,
                        syncs_only=cause == Cause.ACCIDENTAL_SYNC)[1]
    out = BubbleColumns()
    for g, s in pairs:
        for b in bubbles_of(g, s):
            if b.cause == cause:
                out.add(b.t0, b.t1, b.step, b.cause, b.detail)
    return out.done()


def find_bubbles(trace: Trace, window: tuple[int, int], *, min_gap_ns: int = MIN_BUBBLE_NS,
                 slack_ns: int | None = None, cause: Cause | None = None) -> list[Bubble] | Bubbles:
    """Bubbles in ``window`` with their causes (see ``attribution``); of ``cause`` only, when given
    (then as columns)."""
    return classify(trace, device_gaps(trace, window), min_gap_ns=min_gap_ns, slack_ns=slack_ns, cause=cause)
