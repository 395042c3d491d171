"""Interacting causes charged fairly: each row charged the idle its own removal gives back.

The bubbles partition each gap: every stretch has one cause (``attribution``), and the timeline,
the per-cause totals and the sync sites show that partition. Where two causes make the idle
together, a partition cannot say what removing each gives back: removing either may give back
most of it. The case that matters: a device read in finalize and a plan 1 period slower. The
read makes the host wait for each forward, so the slow plan after it lies on the critical path;
the partition charged the plan 0.3 ms a step (4% of the idle) where removing it gave back 5.8 ms
(issue 28, "two faults at once"), and charged the read all the rest, more than its removal gives.
A row's *charge* (``Diagnosis.charged_ns``; its share and its rank follow it) corrects both ways:

* **Shared stretches.** A host wait the design did not expect delays the host work after it, so
  the sync is charged that work up to its wait's length (``attribution``, "What a sync costs"):
  removing the sync lets that work run while the device is busy. But the work is also its phase's
  own: removing the slow phase, with the sync still there, closes the same stretch. So the phase
  is charged its own bubbles plus the stretches a sync's charge took from it (``GapSplit.shared``,
  under the label of what the host was doing then; host time outside every phase is no phase's,
  and stays the sync's alone).
* **The critical path's floor.** Removing one cause cannot make a step shorter than the longer of
  the device's busy time and the host's own work that remains: the host's time in the window
  outside its waits on the device (expected or not), less the row's own work (a phase's time
  outside waits; nothing for a wait). So a row is charged at most ``window - max(busy, host work
  - its work)``. Where the host keeps up with the device without the row, the floor is the busy
  time and the cap is all the idle: it binds only where another cause keeps the host on the
  critical path. Only for our own traces, where one host thread runs the loop and is never idle
  but in a wait (an imported program's host threads may idle where no record shows it).

A row no sync touched and no other cause holds on the critical path is charged exactly its
bubbles, so where causes do not interact nothing changes; where they do, the charges of two rows
may overlap, and their shares (of all bubble idle) add up to more than 100%: each says what its own
fix gives back, not a slice of a pie. A phase's time is the phase's whether or not the host ran in
it (``host_running`` splits it into three rows: a sleeping slow plan is ``host_blocked`` in plan):
a sync delays a sleep as it delays work, and each of the three is bounded as the phase is.

Measured on the two faults through the real engine, each charge read in the blocks of a run that
switches its fault on and off against what the switching gave back in the same steps
(``benchmarks/charge_ab.py``; ``tests/test_faults_charging.py``): docs/measurements.md, "Two faults
at once, and a slow device".
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.attribution import OUTSIDE_PHASES, GapSplit
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.runs import Runs, first_of_each
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.lanes import host_phases
from photon_trace.telemetry.trace.records import Trace


class HostWork(NamedTuple):
    """What the critical path's floor needs, over one window."""
    window_ns: int
    busy_ns: int                            # the analysed stream's busy time
    host_ns: int                            # the window less the host's waits on the device
    phase_ns: dict[str, int]                # per top-level phase, its time outside waits


def _union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _less(spans: list[tuple[int, int]], holes: list[tuple[int, int]]) -> int:
    """The time of disjoint ``spans`` not inside disjoint ``holes`` (both in time order)."""
    total, j = 0, 0
    for a, b in spans:
        total += b - a
        while j < len(holes) and holes[j][1] <= a:
            j += 1
        k = j
        while k < len(holes) and holes[k][0] < b:
            total -= min(b, holes[k][1]) - max(a, holes[k][0])
            k += 1
    return total


def _runs(t0: np.ndarray, t1: np.ndarray) -> Runs:
    """The union of intervals in any order (touching ones merge), as disjoint ``Runs``."""
    order = np.lexsort((t1, t0))
    return Runs.of(t0[order], t1[order])


def host_work(trace: Trace, window: tuple[int, int], busy_ns: int) -> HostWork | None:
    """The host's own work in ``window`` (see the module docstring); None for an imported trace.
    Unions and overlaps as arrays (``runs``): a loop over every wait and phase span was ~2 s of
    checking a million-span trace of ours."""
    if trace.header.get("source"):
        return None
    w0, w1 = window
    t0, t1 = column(trace.waits, "t0"), column(trace.waits, "t1")
    keep = (t1 > w0) & (t0 < w1) & (t1 > t0)
    waits = _runs(np.maximum(t0[keep], w0), np.minimum(t1[keep], w1))
    phases = host_phases(trace)
    code, names = codes(trace.host_spans, "phase")
    t0, t1 = column(trace.host_spans, "t0"), column(trace.host_spans, "t1")
    is_phase = np.array([name in phases for name in names] + [False], dtype=bool)
    mine = np.flatnonzero(is_phase[code] & (t1 > w0) & (t0 < w1)) if len(code) else np.empty(0, np.int64)
    code, t0, t1 = code[mine], np.maximum(t0[mine], w0), np.minimum(t1[mine], w1)
    phase_ns = {}
    for c in code[np.sort(first_of_each(code))].tolist():     # in order of first appearance, as before
        a, b = t0[code == c], t1[code == c]
        if (b < a).any():   # a span that ends before it starts (a hand-made trace): as the loop took it
            phase_ns[names[c]] = _less(_union(zip(a.tolist(), b.tolist())), list(waits))
            continue
        own = _runs(a, b)
        phase_ns[names[c]] = own.total() - int(waits.within(own.starts, own.ends).sum())
    window_ns = max(0, w1 - w0)
    return HostWork(window_ns, busy_ns, window_ns - waits.total(), phase_ns)


def _shared_parts(splits: Iterable[tuple[object, GapSplit]]) -> Iterable[tuple[tuple[Cause, str], int, int]]:
    """(row, t0, t1) of each stretch a sync's charge took from a phase (``GapSplit.shared``; time
    outside the phases is no phase's), clipped to its gap's part in the window (``gap`` is a
    ``bubbles.Gap``: its ``t0``, ``t1`` are the window's part of the gap)."""
    for gap, s in splits:
        for p in s.shared:
            if p.detail.startswith(OUTSIDE_PHASES):
                continue    # no phase recorded: nothing that a fix of one phase would remove
            a, b = max(p.t0, gap.t0), min(p.t1, gap.t1)
            if a < b:
                yield (p.cause, p.detail), a, b


def shared_idle(splits: Iterable[tuple[object, GapSplit]]) -> dict[tuple[Cause, str], int]:
    """Per (cause, detail), the idle in other rows' bubbles its removal closes too: the host time
    a sync's charge took from it (``_shared_parts``)."""
    out: dict[tuple[Cause, str], int] = defaultdict(int)
    for key, a, b in _shared_parts(splits):
        out[key] += b - a
    return dict(out)


def charged_spans(splits: Iterable[tuple[object, GapSplit]]) -> dict[tuple[Cause, str], list[tuple[int, int]]]:
    """Per (cause, detail), the stretches its charge holds before the cap, in time order: its
    bubbles (the gaps' parts in the window) and the stretches it shares with a sync (as
    ``shared_idle``). Their lengths add up to ``charges`` uncapped; where in the window they lie
    lets a charge be read per step (an interval from the steps' variability, or the steps of
    some blocks only)."""
    splits = list(splits)
    out: dict[tuple[Cause, str], list[tuple[int, int]]] = defaultdict(list)
    for gap, s in splits:
        for p in s.parts:
            a, b = max(p.t0, gap.t0), min(p.t1, gap.t1)
            if a < b:
                out[(p.cause, p.detail)].append((a, b))
    for key, a, b in _shared_parts(splits):
        out[key].append((a, b))
    return {k: sorted(v) for k, v in out.items()}


_PHASE_ROWS = (Cause.HOST_BOUND, Cause.HOST_BLOCKED, Cause.HOST_DESCHEDULED)
"""The rows of a phase's time: its host code, and the host not running in it (``host_running``)."""


def cap(key: tuple[Cause, str], work: HostWork | None) -> int | None:
    """The most removing row ``key`` alone can give back (None: no bound known): the window less
    the longer of the device's busy time and the host work that remains without the row."""
    cause, detail = key
    if work is None or Cause(cause).queued:
        return None
    if cause in (Cause.ACCIDENTAL_SYNC, Cause.COMMIT_WAIT):
        own = 0                         # a wait: no host work of its own
    elif cause in _PHASE_ROWS and detail in work.phase_ns:
        own = work.phase_ns[detail]     # the phase's whole time: for a part of it (the host not
                                        # running in it), a bound that is looser, never wrong
    else:
        return None                     # host time outside the phases: its own work is not known
    return max(0, work.window_ns - max(work.busy_ns, work.host_ns - own))


def charges(idle: dict[tuple[Cause, str], int], splits: Iterable[tuple[object, GapSplit]] | dict[tuple[Cause, str], int],
            work: HostWork | None) -> dict[tuple[Cause, str], int]:
    """Each row's charge: its bubbles' ``idle`` and the stretches it shares with a sync, at most
    what the critical path leaves its removal (``cap``); a row with shared stretches and no
    bubble of its own is one too. ``splits``: the pairs, or their ``shared_idle`` already summed."""
    shared = splits if isinstance(splits, dict) else shared_idle(splits)
    out = {}
    for key in idle.keys() | shared.keys():    # a phase a sync took all of has no bubble, yet a charge
        charged = idle.get(key, 0) + shared.get(key, 0)
        bound = cap(key, work)
        out[key] = charged if bound is None else min(charged, bound)
    return out
