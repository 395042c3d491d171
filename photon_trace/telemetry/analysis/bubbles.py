"""Device busy time, the gaps between compute ops, and each bubble's cause.

Busy is the union of compute-stream ops. A *gap* is the time between one
merged run of compute ops and the next. Gaps shorter than ``min_gap_ns`` are the
device's own per-command overhead (HTA's "kernel wait": a GPU's launch gap, the
host-process device's command pickup) and are reported in bulk as dispatch time;
longer ones are *bubbles*, each given one cause. If the op after the gap had
been enqueued before the gap began, the host did not hold it up: the cause is
``copy_wait`` when a copy it depended on ended in the gap, else ``dispatch``
(the device was late picking up work it already had: on the host-process device
its command loop and wake-up message, on a GPU a launch queue that ran dry). Otherwise the host
was late, and the causes are tried in this order:

1. ``accidental_sync``: an unexpected host wait overlaps the gap (detail: its
   call site).
2. ``commit_wait``: an expected host wait overlaps the gap while the host is
   waiting on the step the device just finished or a later one. That is depth 1
   by design: the device idles through commit, plan and launch (detail: the
   wait's call site).
3. ``copy_wait``: the next compute op's step had a copy (the mask upload) end
   inside the gap after that op had been enqueued: the device waited for the
   copy (detail: the copy op).
4. The host has not regained its lead since a wait: an earlier bubble was an
   accidental sync or a commit wait, this gap comes before the end of the step
   after that bubble's, and no step since began with its first op queued at
   least ``min_gap_ns`` before the device ran out of work. The wait emptied the
   queue, so the host's serial work after it is the wait's cost too; the bubble
   inherits that cause and detail (the mask-upload bug leaves two or three gaps
   per step, a blocking step with a stage op two).
5. ``host_bound``: the host was the last thing the device waited for (detail: the
   host phase that covered most of the time between the gap's start and the
   next op's enqueue, or ``"other"`` if the host was in none).

"Compute" is the trace's primary stream (``lanes.primary_stream``) and "copy" any other:
in an imported trace the op the device waited for may be on any stream (an NCCL or a
side stream, joined by ``cudaStreamWaitEvent``); the cause is then ``stream_wait`` and
the detail names that stream and op. The host phases are ``lanes.host_phases``.

A wait counts if it has a positive length (a zero-length wait blocked nothing)
and overlaps the gap or ends as it opens (a drain ends when the device does);
``slack_ns`` widens the gap's start to absorb the device-to-host clock error.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import NamedTuple

from photon_trace.telemetry.analysis._index import IntervalIndex, overlap
from photon_trace.telemetry.analysis.lanes import COPY, TOP_PHASES, host_phases, primary_stream
from photon_trace.telemetry.analysis.window import compute_ops
from photon_trace.telemetry.records import DeviceSpan, HostSpan, Trace

MIN_BUBBLE_NS = 20_000
"""Gaps under 20 µs are dispatch overhead, not bubbles: the host-process device
takes tens of µs per command and a GPU a few µs per kernel launch."""

HOST_BOUND = "host_bound"
COMMIT_WAIT = "commit_wait"
ACCIDENTAL_SYNC = "accidental_sync"
COPY_WAIT = "copy_wait"
DISPATCH = "dispatch"
STREAM_WAIT = "stream_wait"
CAUSES = (HOST_BOUND, COMMIT_WAIT, ACCIDENTAL_SYNC, COPY_WAIT, STREAM_WAIT, DISPATCH)

__all__ = ["Bubble", "Gap", "CAUSES", "TOP_PHASES", "MIN_BUBBLE_NS", "busy_intervals", "device_gaps",
           "classify", "find_bubbles"]


class Gap(NamedTuple):
    """Device idle between two merged runs of compute ops (clipped to the window)."""
    t0: int
    t1: int
    prev: DeviceSpan   # the op whose end opened the gap
    next: DeviceSpan   # the op whose start closed it
    full_ns: int       # unclipped length, which decides bubble vs dispatch


class Bubble(NamedTuple):
    t0: int
    t1: int
    duration_ns: int
    step: int          # the step of the op after the gap
    cause: str         # one of CAUSES
    detail: str        # host phase, call site, or copy op
    covered_ns: int = 0    # of it, time another stream was busy (``streams.with_cover``)
    covered_by: str = ""   # the stream that covered most of it


def busy_intervals(trace: Trace, window: tuple[int, int]) -> list[tuple[int, int]]:
    """The union of compute ops as disjoint ``(t0, t1)`` runs, clipped to ``window``."""
    w0, w1 = window
    runs: list[tuple[int, int]] = []
    for d in compute_ops(trace):
        a, b = max(d.t0, w0), min(d.t1, w1)
        if a >= b:
            continue
        if runs and a <= runs[-1][1]:
            if b > runs[-1][1]:
                runs[-1] = (runs[-1][0], b)
        else:
            runs.append((a, b))
    return runs


def device_gaps(trace: Trace, window: tuple[int, int]) -> list[Gap]:
    """Every gap between consecutive compute ops that lies (partly) in ``window``."""
    w0, w1 = window
    gaps: list[Gap] = []
    last: DeviceSpan | None = None
    for d in compute_ops(trace):
        if last is not None and d.t0 > last.t1:
            a, b = max(last.t1, w0), min(d.t0, w1)
            if a < b:
                gaps.append(Gap(a, b, last, d, d.t0 - last.t1))
        if last is None or d.t1 > last.t1:
            last = d
    return gaps


class _Context:
    """Indexes over one trace, built once per analysis."""

    def __init__(self, trace: Trace, slack_ns: int):
        self.slack = slack_ns
        self.unexpected = IntervalIndex(w for w in trace.waits if not w.expected and w.t1 > w.t0)
        self.expected = IntervalIndex(w for w in trace.waits if w.expected and w.t1 > w.t0)
        top = host_phases(trace)
        self.phases: IntervalIndex[HostSpan] = IntervalIndex(h for h in trace.host_spans if h.phase in top)
        self.copies: dict[int, list[DeviceSpan]] = defaultdict(list)   # the step's ops on other streams
        stream = primary_stream(trace)
        for d in trace.device_spans:
            if d.stream != stream:
                self.copies[d.step].append(d)
        # The host's lead at each step boundary: how long before the device ran out of
        # work the host had enqueued the step's first compute op (negative: too late).
        self.step_starts: list[int] = []
        self.leads: list[int] = []
        seen: set[int] = set()
        busy_until: int | None = None
        for d in compute_ops(trace):
            if d.step not in seen and busy_until is not None:
                self.step_starts.append(d.t0)
                self.leads.append(busy_until - d.enqueued)
            seen.add(d.step)
            busy_until = d.t1 if busy_until is None else max(busy_until, d.t1)

    def regained_lead(self, after: int, before: int, min_lead: int) -> bool:
        """Did a step that started in (after, before) find its first op already queued ``min_lead`` early?"""
        lo, hi = bisect_right(self.step_starts, after), bisect_left(self.step_starts, before)
        return any(lead >= min_lead for lead in self.leads[lo:hi])

    def wait_cause(self, g0: int, g1: int, prev: DeviceSpan) -> tuple[str, str] | None:
        a = g0 - self.slack  # a wait that ends as the gap opens is the classic drain: it counts
        hits = [(overlap(w.t0, w.t1, a, g1), w.site) for w in self.unexpected.overlapping(a - 1, g1)]
        if hits:
            return ACCIDENTAL_SYNC, max(hits)[1]
        hits = [(overlap(w.t0, w.t1, a, g1), w.site) for w in self.expected.overlapping(a - 1, g1)
                if w.step >= prev.step]
        if hits:
            return COMMIT_WAIT, max(hits)[1]
        return None

    def copy_cause(self, g0: int, g1: int, nxt: DeviceSpan) -> tuple[str, str] | None:
        late = [c for c in self.copies.get(nxt.step, ())
                if g0 < c.t1 <= g1 + self.slack and c.t1 > nxt.enqueued]
        if late:
            c = max(late, key=lambda c: c.t1)
            return (COPY_WAIT, c.op) if c.stream == COPY else (STREAM_WAIT, f"{c.stream}: {c.op}")
        return None

    def host_phase(self, g0: int, enqueued: int) -> str:
        by_phase: dict[str, int] = defaultdict(int)
        for h in self.phases.overlapping(g0, enqueued):
            by_phase[h.phase] += overlap(h.t0, h.t1, g0, enqueued)
        return max(by_phase.items(), key=lambda kv: kv[1])[0] if by_phase else "other"


def classify(trace: Trace, gaps: list[Gap], *, min_gap_ns: int = MIN_BUBBLE_NS,
             slack_ns: int | None = None) -> list[Bubble]:
    """The bubbles among ``gaps`` (those of at least ``min_gap_ns``), each with its cause."""
    if slack_ns is None:
        slack_ns = min(int(trace.header.get("clock", {}).get("device_error_ns", 0) or 0), min_gap_ns)
    ctx = _Context(trace, slack_ns)
    bubbles: list[Bubble] = []
    waited: Bubble | None = None  # the last bubble a host wait caused, directly or inherited
    origin_step = waited_end = 0
    for g in gaps:
        if g.full_ns < min_gap_ns:
            continue
        full0, full1 = g.prev.t1, g.next.t0
        if g.next.enqueued <= full0:
            # The op was queued before the device ran dry: nothing the host did kept it waiting.
            found = ctx.copy_cause(full0, full1, g.next) or (DISPATCH, "queued op started late")
        else:
            # a wait that began after the next op was enqueued held nothing up
            found = (ctx.wait_cause(full0, min(full1, g.next.enqueued), g.prev)
                     or ctx.copy_cause(full0, full1, g.next))
        inherited = False
        if found is None:
            if (waited is not None and g.prev.step <= origin_step + 1
                    and not ctx.regained_lead(waited_end, full1, min_gap_ns)):
                found, inherited = (waited.cause, waited.detail), True   # the host never got back ahead
            else:
                found = HOST_BOUND, ctx.host_phase(full0, min(g.next.enqueued, full1))
        bubble = Bubble(g.t0, g.t1, g.t1 - g.t0, g.next.step, *found)
        if found[0] in (ACCIDENTAL_SYNC, COMMIT_WAIT):
            if not inherited:
                origin_step = g.next.step
            waited, waited_end = bubble, full1
        bubbles.append(bubble)
    return bubbles


def find_bubbles(trace: Trace, window: tuple[int, int], *, min_gap_ns: int = MIN_BUBBLE_NS,
                 slack_ns: int | None = None) -> list[Bubble]:
    """Bubbles in ``window`` with their causes (see the module docstring)."""
    return classify(trace, device_gaps(trace, window), min_gap_ns=min_gap_ns, slack_ns=slack_ns)
