"""Whether the host ran: host-late time charged to a phase or to the commit wait, split by
the thread's own counters.

A host span and a host wait carry the recording thread's on-CPU time (``cpu_ns``) and
run-queue wait (``runq_ns``: runnable, not running) over them (``recording/thread_clock.py``).
``attribution`` labels each stretch of a gap's host-late part with what covered it; where
that is a top-level phase, another host span with counters (the server loop's ``serve``
between ticks: ``host_bound`` "outside phases (in serve)") or an expected wait with counters,
this module splits it:

* **A phase** (``host_bound`` in it; a ``serve`` span likewise): only its on-CPU time stays
  host code in that phase; its run-queue time is ``host_descheduled`` (the machine ran something else) and the rest,
  off the CPU and not runnable, ``host_blocked`` (the GIL, a lock, I/O, a sleep). A phase's
  *own* counters are its totals less those of the waits inside it (a commit's copy-back wait
  is the wait's own time, below). The counters say how much, not when: a stretch of a span
  inside a gap gets each share in proportion to the stretch's length (a 1 ms stretch of a
  4 ms phase that ran 2 ms on the CPU: 0.5 ms host code), drawn in the order on-CPU,
  descheduled, blocked.
* **An expected wait** (the commit's copy-back): up to the moment its copy landed (the step's
  ``copy_back`` device span ends) it stays ``commit_wait``. After it the host had its tokens
  and did not take them: that part is never the expected wait, but descheduled for as much of
  it as the wait's run-queue time (what the host waited for a core before the copy landed
  changed nothing, so the run-queue time goes after the landing first) and blocked for the rest.

Noise floor: a split is made only where the time not running in the stretch is at least
``MIN_NOT_RUNNING_NS`` (20 us, the bubble threshold): the thread's CPU clock and the wall
clock are read a few hundred ns apart at each end, and a spinning wait takes a few us to
see a landed copy. Without a run-queue counter (``runq_ns`` -1: no schedstat) the time not
running cannot be told apart and is all ``host_blocked``. A record without counters (-1: an
imported trace, a version-1 file, a wait found after the fact) is not split: such traces are
attributed exactly as before the counters existed.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.records import HostSpan, HostWait, Trace

MIN_NOT_RUNNING_NS = 20_000


class Running(NamedTuple):
    """What a cover's thread did over it: its own wall, on-CPU and run-queue time (``runq_ns``
    -1: unmeasured) and, for an expected wait, when its copy landed (None: a phase)."""
    wall_ns: int
    cpu_ns: int
    runq_ns: int
    landed: int | None = None


def landings(trace: Trace) -> dict[int, int]:
    """Step -> when its tokens reached the host (the end of its ``copy_back``)."""
    op, table = codes(trace.device_spans, "op")
    if "copy_back" not in table:
        return {}
    mine = np.asarray(op) == table.index("copy_back")
    step, t1 = column(trace.device_spans, "step")[mine], column(trace.device_spans, "t1")[mine]
    order = np.lexsort((t1, step))
    step, t1 = step[order], t1[order]
    last = np.append(step[1:] != step[:-1], True)    # each step's latest end comes last
    return dict(zip(step[last].tolist(), t1[last].tolist()))


def of_wait(w: HostWait, landed: dict[int, int], slack_ns: int) -> Running | None:
    """An expected wait's ``Running`` (None without counters or without its step's copy-back)."""
    if w.cpu_ns < 0 or not w.expected or w.step not in landed:
        return None
    return Running(w.t1 - w.t0, w.cpu_ns, w.runq_ns, landed[w.step] + slack_ns)


class PhaseCounters:
    """A phase's own counters: its span's less those of the waits inside it."""

    def __init__(self, waits: list[HostWait]) -> None:
        self._waits = sorted((w for w in waits if w.cpu_ns >= 0), key=lambda w: w.t0)
        self._starts = [w.t0 for w in self._waits]

    def of(self, h: HostSpan) -> Running | None:
        if h.cpu_ns < 0:
            return None
        wall, cpu, runq = h.t1 - h.t0, h.cpu_ns, h.runq_ns
        i = bisect_left(self._starts, h.t0)
        while i < len(self._waits) and self._waits[i].t0 < h.t1:
            w = self._waits[i]
            if w.t1 <= h.t1:     # one thread's clocks: a wait with counters has both or neither
                wall -= w.t1 - w.t0
                cpu -= w.cpu_ns
                runq -= max(w.runq_ns, 0)
            i += 1
        return Running(max(wall, 0), max(cpu, 0), max(runq, 0) if h.runq_ns >= 0 else -1)


def split(x: int, y: int, cause: Cause, detail: str, running: Running | None) -> list[tuple]:
    """[x, y), covered by (``cause``, ``detail``), as (t0, t1, cause, detail) stretches by
    whether the host ran (module docstring)."""
    if running is None or y <= x:
        return [(x, y, cause, detail)]
    if running.landed is not None:
        return _after_landing(x, y, cause, detail, running)
    length, wall = y - x, running.wall_ns
    if wall <= 0:
        return [(x, y, cause, detail)]
    on_cpu = length * min(running.cpu_ns, wall) // wall
    off = length - on_cpu
    if off < MIN_NOT_RUNNING_NS:
        return [(x, y, cause, detail)]
    runq = min(off, length * running.runq_ns // wall) if running.runq_ns > 0 else 0
    a, b = x + on_cpu, x + on_cpu + runq
    return [s for s in ((x, a, cause, detail), (a, b, Cause.HOST_DESCHEDULED, detail),
                        (b, y, Cause.HOST_BLOCKED, detail)) if s[1] > s[0]]


def _after_landing(x: int, y: int, cause: Cause, detail: str, running: Running) -> list[tuple]:
    landed = min(max(x, running.landed), y)
    late = y - landed
    if late < MIN_NOT_RUNNING_NS:
        return [(x, y, cause, detail)]
    b = landed + min(late, max(running.runq_ns, 0))
    return [s for s in ((x, landed, cause, detail), (landed, b, Cause.HOST_DESCHEDULED, detail),
                        (b, y, Cause.HOST_BLOCKED, detail)) if s[1] > s[0]]
