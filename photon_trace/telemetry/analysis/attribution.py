"""Who made each part of a device gap: the split behind every bubble's cause.

A gap runs from the end of one compute op (``g0``) to the start of the next
(``g1``); the next op was enqueued at ``e``. It has two parts, and each is split
by what actually covers it, so a cause is charged only its own time:

* **Host late**, ``[g0, min(e, g1))``: the device had nothing to run because the
  host had not enqueued it yet. Each stretch goes to what the host was doing then,
  in this order of precedence:

  1. an unexpected host wait in progress: ``accidental_sync`` at its call site;
  2. an expected wait, the design's commit wait: ``commit_wait`` at its call site
     (a blocking loop's copy wait proper; the host phases after it are their own; in
     a pipelined loop, a commit still waiting for its step's copy once the device has
     run out of work: the copy, or the host's wake-up from it, came late);
  3. a top-level host phase (plan, launch, commit, finalize; an imported trace's
     header names its own, ``trace.lanes.host_phases``): ``host_bound`` in it;
  4. nothing the engine recorded: ``host_bound`` "outside phases" (naming the
     innermost other host span that encloses it, if any), never a neighbour's name.

  Where the phase or the expected wait carries the thread's counters, the stretch is
  split by whether the host ran (``host_running.py``): a phase keeps only its on-CPU
  share as ``host_bound``, the rest is ``host_descheduled`` (runnable, not running) or
  ``host_blocked`` (off the CPU); an expected wait's time after its copy landed is one of
  those two, never ``commit_wait``. Records without counters are not split.

* **The device's own tail**, ``[g0, g0 + tail)``, on a device that runs one op at a time
  (the trace header's ``device.concurrent_streams`` false: the host-process worker): the
  device was still busy with work queued before the gap on its other streams (the previous
  step's copy-back): ``device_busy`` naming that op, whether or not the host had enqueued
  the next op yet (unless the next op waited for that very copy: ``copy_wait`` below). No
  host fix shortens it; it comes first, and the host-late and queued rules below share
  the rest.

* **Queued**, ``[max(e, g0), g1)``: the op was in the device's queue. If it waited
  for a copy of its step (the mask upload) that ended after it was enqueued, the copy's
  time is ``copy_wait`` (before the copy began, the device had started nothing: a late
  start, as below); for an op of its step on another stream (an imported trace's NCCL or
  side stream, joined by ``cudaStreamWaitEvent``), ``stream_wait`` naming that stream
  and op; otherwise the device started it late: ``dispatch``, its launch
  latency (between two ops of one graph launch, an imported trace's ``graph_replays``: the
  graph's own scheduling, ``GRAPH_NODES``, all of it the device's). Only as much of it as the
  device takes where the host is on time
  (``LaunchLatency``, measured in the same trace) is the device's own; a device that
  ran dry starts later than that (a host-process worker that went to sleep, a GPU
  queue that emptied), and the excess goes to the host-late part's largest cause,
  whose lateness let it run dry (a sync only up to what is left of its charge, below; the
  rest to the largest other cause). Without anything in the trace to measure the device
  by, all of it stays ``dispatch``. The host's lateness comes
  first: a copy enqueued in the same flush as the op never takes the time before it.
  Where the host-process device's worker waited for a CPU inside the gap (its own run-queue
  counter, ``device_running.py``), that much of ``dispatch`` and ``device_busy`` is
  ``device_descheduled``: the machine's doing, not the device's.

**What a sync costs.** A host wait the design did not expect delays everything the
host does after it by the wait's length ``w``; with the wait removed the host would
have enqueued the next op ``w`` earlier. So a sync is charged its own stretch of the
host-late part plus the host time right after it, up to ``w`` in all (a drain that
ends as the gap opens covers none of it, yet costs the host work that follows): a phase's
time whether or not the host ran in it (a sleep after the sync starts ``w`` earlier too), or
time outside the phases; not an expected wait's, whose end the device's copy sets. What
the gap's host-late part does not absorb carries to the next gaps until the host has
regained its lead (a step began with its first op queued at least ``min_gap_ns``
early): the mask-upload bug leaves two or three gaps per step. A sync in a run whose
host is slow anyway waits briefly and is charged that little; the slow phase keeps
the rest. Expected waits carry nothing: a blocking loop's host phases after its
commit wait are named as such.

Each split also records the *chain*: the host time per cause since the previous gap's
enqueue (or since the host was last ahead), the serial work that led to this gap;
``diagnosis`` predicts what removing a cause gives from it.

**No work is no cause** (``no_work``): time the engine had nothing to run is cut out of every
gap and chain; the parts outside are attributed as any other, ``GapSplit.no_work_ns`` is the cut.
A device that ran dry for want of work starts the first op after it late too: that excess is
no host cause's (no host code left it dry) but its worker waking, ``device_descheduled``.

A wait counts if it has a positive length; ``slack_ns`` (the device-to-host clock
error) lets a wait that ends just before the gap opens count as ending with it.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from copy import copy
from statistics import median
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis import device_running
from photon_trace.telemetry.analysis._index import IntervalIndex
from photon_trace.telemetry.analysis.carried import Carry as _Carry
from photon_trace.telemetry.analysis.carried import carried_split
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.gaps import Gaps, Ops
from photon_trace.telemetry.analysis.host_running import landings
from photon_trace.telemetry.analysis.host_running import split as split_running
from photon_trace.telemetry.analysis.host_timeline import OUTSIDE_PHASES, host_timeline, outside_detail
from photon_trace.telemetry.analysis.gap_parts import (GRAPH_NODES, LAUNCH_LATENCY, WOKE_AFTER_NO_WORK, Part, charge,
                                                       late_start, merged, relabel)
from photon_trace.telemetry.analysis.launch_latency import LaunchLatency
from photon_trace.telemetry.analysis.no_work import NoWork
from photon_trace.telemetry.analysis.runs import first_of_each
from photon_trace.telemetry.analysis.step_ops import StepOps
from photon_trace.telemetry.trace.lanes import COPY, host_phases, primary_stream
from photon_trace.telemetry.trace.records import DeviceSpan, HostWait, Trace

__all__ = ["OUTSIDE_PHASES", "outside_detail", "Attribution", "GapSplit", "Part", "LAUNCH_LATENCY", "GRAPH_NODES",
           "WOKE_AFTER_NO_WORK"]

class GapSplit(NamedTuple):
    """One gap's attribution, and what a fix's prediction needs to know about it."""
    prev: DeviceSpan
    next: DeviceSpan
    parts: list[Part]             # covering the whole gap but its no work, in time order
    host_late_ns: int             # before the next op was enqueued (less no work)
    chain: dict[tuple[Cause, str], int]   # host time per (cause, detail) since the last gap: the serial
                                  # work that led to this enqueue (see ``diagnosis``)
    regained: bool                # the host was ahead of the device again at a step start since the last gap
    launch_ns: int | None = None  # the device's own launch latency before this gap's next op (None: unknown)
    tail_ns: int = 0              # the device's own work at the gap's start that no host fix removes
                                  # (``Attribution.tail``; 0 on a device that runs streams concurrently)
    no_work_ns: int = 0           # of the gap, the time in no work (cut out of ``parts``: no cause's)
    shared: tuple[Part, ...] = () # host work a sync's charge took (its parts say the sync), under the
                                  # label of what covered it: that phase's removal closes them too
                                  # (``charging``)


class Attribution:
    """Indexes over one trace, built once; ``split`` attributes one gap at a time, in time order."""

    def __init__(self, trace: Trace, slack_ns: int, min_gap_ns: int, launch: LaunchLatency | None = None):
        self.slack = slack_ns
        self.min_gap = min_gap_ns
        self.launch = launch or LaunchLatency()   # the device's own launch latency (``launch_latency``)
        waits = [w for w in trace.waits if w.t1 > w.t0]
        self.unexpected: IntervalIndex[HostWait] = IntervalIndex(w for w in waits if not w.expected)
        # What covers host time, by precedence (``host_timeline``); no work is cut out of every gap
        self.phases = host_phases(trace)
        self.no_work = NoWork(trace)
        self._timeline = host_timeline(trace.host_spans, waits, self.phases, landings(trace), slack_ns,
                                       bool(self.no_work))
        device = trace.header.get("device")
        self.serial = isinstance(device, dict) and device.get("concurrent_streams") is False
        # an imported trace whose graphs ran: ops sharing an enqueue came from one graph launch
        self.graphs = bool(trace.header.get("graph_replays"))
        self.copies = StepOps(trace, primary_stream(trace))   # the step's ops on other streams
        # Where the host was ahead again: a step's first compute op enqueued at least min_gap
        # before the device ran out of work. Time order; (start of the op, its enqueue).
        ops = Ops(trace)
        first = np.zeros(len(ops), dtype=bool)
        first[first_of_each(ops.step)] = True
        first[:1] = False       # nothing ran before the very first op
        busy_until = np.maximum.accumulate(ops.t1)[:-1] if len(ops) else ops.t1
        ahead = np.flatnonzero(first[1:] & (busy_until - ops.enqueued[1:] >= min_gap_ns)) + 1
        self.ahead: list[tuple[int, int]] = list(zip(ops.t0[ahead].tolist(), ops.enqueued[ahead].tolist()))
        self._ahead_starts = [t for t, _ in self.ahead]
        self._carry: _Carry | None = None
        self._charged: set[HostWait] = set()
        self._last: tuple[int, int] | None = None   # (next op start, its enqueue) of the last gap split
        self._shared: list[Part] = []   # the gap being split's host work a sync's charge took

    def fresh(self) -> Attribution:
        """The same indexes over the trace with no gap split yet: another pass, over other gaps."""
        out = copy(self)
        out._carry, out._charged, out._last, out._shared = None, set(), None, []
        return out

    def same_course(self, other: Attribution, g0: int) -> bool:
        """Whether from the gap opening at ``g0`` on (gaps in time order) this splits each gap as
        ``other`` does: a split depends on the gap, the launch latency, the carried charge, the
        last gap's enqueue and the waits charged already. A wait charged by one and not the
        other matters only if a later gap can reach it (its end past ``g0`` less the slack); one
        charged by an earlier gap began before that gap closed, so before ``g0``."""
        if (self.launch, self._carry, self._last) != (other.launch, other._carry, other._last):
            return False
        return all((w in self._charged) == (w in other._charged)
                   for w in self.unexpected.overlapping(g0 - self.slack - 1, g0))

    # -- one gap ----------------------------------------------------------------------------
    def split(self, prev: DeviceSpan, nxt: DeviceSpan, copy_waited: bool | None = None) -> GapSplit:
        """Attribute the gap between ``prev`` and ``nxt``; call for each gap in time order.
        ``copy_waited``: ``copy_waits``'s answer for this gap, when the caller has it already."""
        if self._carry is not None:     # the common gap of our own trace, without the general rules
            done = carried_split(self, prev, nxt, copy_waited, GapSplit)
            if done is not None:
                return done
        g0, g1 = prev.t1, nxt.t0
        late_end = min(max(nxt.enqueued, g0), g1)
        tail_op = self._tail(prev, nxt) if self.serial else None
        tail_end = tail_op[0] if tail_op else g0
        regained, chain_from = self._regained(g1)
        if regained:
            self._carry = None
        no_work = self.no_work
        late_idle = no_work.overlap_ns(g0, late_end) if no_work else 0    # no work in the host-late part
        parts: list[Part] = []
        chain: dict[tuple[Cause, str], int] = {}
        self._shared = []
        if late_end > g0:
            parts, chain = self._covered(min(chain_from, g0), g0, late_end)
            if parts and parts[0].t0 < g0:
                _, t1, cause, detail = parts[0]
                parts[0] = Part(g0, t1, cause, detail)
            if tail_op:     # before the syncs are charged: a sync costs only host time the device could use
                parts = relabel(parts, g0, min(tail_end, late_end), Cause.DEVICE_BUSY, tail_op[1])
            parts = self._host_late(g0, late_end, parts)
        one_launch = self.one_launch(prev, nxt)
        launch = None if one_launch else self.launch.of(prev, nxt)
        if late_end < g1:
            queued = self._queued_parts(late_end, g1, nxt, parts, launch, GRAPH_NODES if one_launch else LAUNCH_LATENCY,
                                        copy_waited, woke=late_idle > 0)
            if self._carry is not None:
                self._spend([p for p in queued if p.cause == Cause.ACCIDENTAL_SYNC])
            parts = merged(parts + queued)
            if tail_op and tail_end > late_end:
                parts = relabel(parts, late_end, tail_end, Cause.DEVICE_BUSY, tail_op[1])
        self._last = (g1, min(nxt.enqueued, late_end))
        parts = device_running.split(parts, prev, nxt)   # a worker that waited for a CPU: the deployment's
        if no_work:
            return GapSplit(prev, nxt, no_work.cut(parts), late_end - g0 - late_idle, chain, regained, launch,
                            tail_end - g0, no_work_ns=no_work.overlap_ns(g0, g1), shared=tuple(self._shared))
        return GapSplit(prev, nxt, parts, late_end - g0, chain, regained, launch, tail_end - g0, 0, tuple(self._shared))

    def passed_syncless(self, prev: DeviceSpan, nxt: DeviceSpan) -> bool:
        """Whether the gap between ``prev`` and ``nxt`` can have no ``accidental_sync`` part: no
        sync's charge carried into it and no unexpected wait reaching its host-late part. Then it
        is passed over as ``split`` would leave the state (the carry, the waits charged, the last
        enqueue) without splitting it: for a caller that only counts the syncs' idle (the gate's
        whole-run pass). Otherwise nothing changes and the caller splits it."""
        g0, g1 = prev.t1, nxt.t0
        late_end = min(max(nxt.enqueued, g0), g1)
        regained = self._regained(g1)[0]
        if self._carry is not None and not regained:
            return False
        if late_end > g0 and next(self.unexpected.overlapping(g0 - self.slack - 1, late_end), None) is not None:
            return False
        self._carry = None
        self._last = (g1, min(nxt.enqueued, late_end))
        return True

    def one_launch(self, prev: DeviceSpan, nxt: DeviceSpan) -> bool:
        """Whether ``prev`` and ``nxt`` came from one graph launch (one enqueue for both)."""
        return self.graphs and prev.enqueued == nxt.enqueued != 0

    def _tail(self, prev: DeviceSpan, nxt: DeviceSpan) -> tuple[int, str] | None:
        """(where the device's own tail work ends, its op) for the gap after ``prev``; None without one."""
        if not self.serial:
            return None
        g0, g1 = prev.t1, nxt.t0
        ends = [(c.t1, c.op) for step in {prev.step, nxt.step} for c in self.copies.ending_in(step, g0, g1)
                if c.enqueued <= g0]
        return max(ends) if ends else None

    def tail(self, prev: DeviceSpan, nxt: DeviceSpan) -> int:
        """How long into the gap after ``prev`` the device was still busy with work queued before
        the gap, on its other streams (the previous step's copy-back), where the trace's header
        says it runs one op at a time (``device.concurrent_streams`` false: the host-process
        worker). Its compute stream idles then, but the device does not: no host fix shortens
        that stretch, so a cleared gap keeps it (``diagnosis``), and the device's own launch
        latency is measured after it. A GPU's copy engine runs beside its compute: 0 there."""
        t = self._tail(prev, nxt)
        return t[0] - prev.t1 if t else 0

    def _regained(self, g1: int) -> tuple[bool, int]:
        """(whether the host got ahead since the last gap, where the host's serial chain to this
        gap's enqueue starts: that point, or the last gap's enqueue)."""
        if self._last is None:
            return False, g1
        since, last_enqueue = self._last
        lo, hi = bisect_right(self._ahead_starts, since), bisect_left(self._ahead_starts, g1)
        if hi > lo:
            return True, self.ahead[hi - 1][1]
        return False, last_enqueue

    def _queued_parts(self, e: int, g1: int, nxt: DeviceSpan, late: list[Part], launch: int | None,
                      detail: str = LAUNCH_LATENCY, waited: bool | None = None, woke: bool = False) -> list[Part]:
        left = {self._carry.site: self._carry.left_ns} if self._carry is not None else {}
        if not (self._copy_waited(e, g1, nxt) if waited is None else waited):
            return late_start(e, g1, late, launch, detail, left, woke)
        c = self.copies.latest_ending(nxt.step, max(e, nxt.enqueued), g1 + self.slack)
        wait = (Part(0, g1, Cause.COPY_WAIT, c.op) if c.stream == COPY
                else Part(0, g1, Cause.STREAM_WAIT, f"{c.stream}: {c.op}"))
        # the wait is the copy's own time; before the copy began, the device had started
        # nothing queued: a late start like any other (a worker that ran dry and slept)
        begun = min(max(e, c.t0), g1)
        return late_start(e, begun, late, launch, detail, left, woke) + [wait._replace(t0=begun)]

    def _spend(self, taken: list[Part]) -> None:
        """A late start given to the carried sync counts against what is left of its charge."""
        if self._carry is not None and taken:
            left = self._carry.left_ns - sum(p.t1 - p.t0 for p in taken if p.detail == self._carry.site)
            self._carry = self._carry._replace(left_ns=left) if left > 0 else None

    def _copy_waited(self, e: int, g1: int, nxt: DeviceSpan) -> bool:
        """Whether a copy of ``nxt``'s step ended inside its queued time [e, g1]."""
        return self.copies.ends_in(nxt.step, max(e, nxt.enqueued), g1 + self.slack)

    def copy_waits(self, gaps: Gaps) -> np.ndarray:
        """``_copy_waited`` of every gap of ``gaps`` at once (the queued part begins at the next op's
        enqueue, within the gap): one ``searchsorted`` for all, not two per gap."""
        ops, n = gaps.ops, gaps.next
        g0, g1, enq = ops.t1[gaps.prev], ops.t0[n], ops.enqueued[n]
        late_end = np.minimum(np.maximum(enq, g0), g1)
        return self.copies.any_end_in(ops.step[n], np.maximum(late_end, enq), g1 + self.slack)

    def launch_latency(self, gaps: Gaps) -> LaunchLatency:
        """The device's own launch latency, measured on ``gaps`` (every size; see ``LaunchLatency``)."""
        queued, started = self._samples(gaps)
        step_start = int(median(queued[True])) if queued[True] else None
        if step_start is None and started:
            step_start = sorted(started)[len(started) // 10]
        return LaunchLatency(step_start, int(median(queued[False])) if queued[False] else None)

    def _samples(self, gaps: Gaps) -> tuple[dict[bool, list[int]], list[int]]:
        """``launch_latency``'s samples, every gap at once: (the gaps before an op already queued
        when the device ran dry, less the device's tail, for a step's first op and for later ops;
        for a step's first op enqueued late, from its enqueue to its start). Graph launches' own
        gaps and gaps spent waiting for a copy are left out."""
        ops, p, n = gaps.ops, gaps.prev, gaps.next
        p_t1, n_t0, n_enq, n_step = ops.t1[p], ops.t0[n], ops.enqueued[n], ops.step[n]
        counted = ~(self.graphs & (ops.enqueued[p] == n_enq) & (n_enq != 0))
        first = n_step != ops.step[p]

        def unwaited(k: np.ndarray, e: np.ndarray) -> np.ndarray:   # of gaps k, no copy of the step ended in [e, g1]
            return k[~self.copies.any_end_in(n_step[k], np.maximum(e, n_enq[k]), n_t0[k] + self.slack)]

        q = np.flatnonzero(counted & (n_enq <= p_t1))
        q = unwaited(q, p_t1[q])
        own = gaps.full_ns[q]
        if self.serial:     # the device's own tail (our host-process device's traces)
            own = own - (self.copies.tail_ends((ops.step[p[q]], n_step[q]), p_t1[q], n_t0[q]) - p_t1[q])
        late = np.flatnonzero(counted & (n_enq > p_t1) & first & (n_enq < n_t0) & (gaps.full_ns <= p_t1 - ops.t0[p]))
        late = unwaited(late, n_enq[late])
        return ({True: own[first[q]].tolist(), False: own[~first[q]].tolist()},
                (n_t0[late] - n_enq[late]).tolist())

    def _host_late(self, a: int, b: int, parts: list[Part]) -> list[Part]:
        """Charge the syncs on the coverage ``parts`` of the host-late stretch [a, b)."""
        if self._carry is not None:
            c = self._carry
            parts, left = charge(parts, a, c.left_ns, c.site, self.phases, self._shared)
            self._carry = c._replace(left_ns=left) if left > 0 else None
        if not len(self.unexpected):
            return parts
        # a wait that ends as the gap opens counts (the classic drain ends with the device); the
        # index yields them by start
        for w in [w for w in self.unexpected.overlapping(a - self.slack - 1, b) if w not in self._charged]:
            self._charged.add(w)
            # its own stretch: the part of the sync-labelled time inside the wait (a carried charge
            # of the same site may sit right after it, merged into one part)
            own = sum(min(p.t1, w.t1) - max(p.t0, w.t0) for p in parts if p.cause == Cause.ACCIDENTAL_SYNC
                      and p.detail == w.site and p.t0 < w.t1 and p.t1 > w.t0)
            parts, left = charge(parts, max(a, min(w.t1, b)), (w.t1 - w.t0) - own, w.site, self.phases,
                                  self._shared)
            if left > 0:
                self._carry = _Carry(w.site, left)
        return parts

    def _covered(self, a: int, g0: int, b: int) -> tuple[list[Part], dict[tuple[Cause, str], int]]:
        """[a, b)'s coverage, no work cut out: its stretches that reach past ``g0``, and its time
        per (cause, detail) (the chain). Summed as arrays where no stretch is split by the host's
        counters."""
        summed = None if self.no_work else self._timeline.summed(a, g0, b)
        if summed is not None:
            totals, after = summed
            return after, totals
        covered = self.no_work.cut(self._coverage(a, b))
        chain: dict[tuple[Cause, str], int] = defaultdict(int)
        for p in covered:
            chain[p[2:]] += p.t1 - p.t0
        return [p for p in covered if p.t1 > g0], dict(chain)

    def _coverage(self, a: int, b: int) -> list[Part]:
        """[a, b) cut where what covers it changes; each stretch labelled by precedence."""
        return [Part(*s) for x, y, label in self._timeline.stretches(a, b) for s in split_running(x, y, *label)]
