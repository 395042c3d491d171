"""Whether the device ran: a host-process device's late starts split by its worker's own counter.

On the host-process backend the "device" is a worker process on the same CPUs as everything
else. When the machine is busy (two CPU burners beside a CI job), the worker waits for a core
with work queued, and the compute stream's gaps grow on the device's side of the gap:
``dispatch`` (a queued op started late) and ``device_busy`` (the worker still on the previous
step's copy). No code change removes that time, on either side: it is the deployment's, like
the host's own ``host_descheduled``, and the idle gate must not fail a run on it.

The worker reads its thread's run-queue counter (schedstat: ns runnable but not running,
cumulative) at each op's start and end (``DeviceSpan.runq_t0``/``runq_t1``). Over a gap
between two compute ops, ``next.runq_t0 - prev.runq_t1`` is how long the worker waited for a
CPU inside it. The counter says how much, not when: that much of the gap's device-side parts
becomes ``device_descheduled``, ``dispatch`` first (a late start is what a worker waiting for a
core makes), latest first, then ``device_busy``. Host-late parts keep their causes: the host's
lateness is its own whatever the worker did meanwhile. So the split never makes a gap's
host-fixable share smaller, and where the worker waited while it had nothing queued (in the
host-late part), the time it waited can at most take the device-side parts, which it would
then overstate; a gap's total is unchanged.

A gap an accidental sync opened is left whole: the sync drained the worker, which then slept,
and its wake-up, run-queue wait included, is what removing the sync gives back (the
mask-upload fault's A/B gain beside two burners), so it stays the sync's to be charged.

Below ``MIN_RUNQ_NS`` (20 us, the bubble threshold) nothing is split: a few us of wake-up
noise stays the device's. GPU traces, imports and older files carry -1: not split.
"""
from __future__ import annotations

from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.trace.records import DeviceSpan

MIN_RUNQ_NS = 20_000
DETAIL = "device worker waited for a CPU"
_TAKES = (Cause.DISPATCH, Cause.DEVICE_BUSY)   # in this order


def waited_ns(prev: DeviceSpan, nxt: DeviceSpan) -> int:
    """How long the device's thread was runnable but not running between ``prev``'s end and
    ``nxt``'s start (0 where not measured)."""
    if prev.runq_t1 < 0 or nxt.runq_t0 < 0:
        return 0
    return max(0, nxt.runq_t0 - prev.runq_t1)


def split(parts: list, prev: DeviceSpan, nxt: DeviceSpan) -> list:
    """``parts`` (a gap's ``attribution.Part`` s in time order) with up to the worker's run-queue
    wait in the gap taken from its device-side parts as ``device_descheduled``."""
    left = waited_ns(prev, nxt)
    if left < MIN_RUNQ_NS or any(p.cause == Cause.ACCIDENTAL_SYNC for p in parts):
        return parts
    out = list(parts)
    for cause in _TAKES:
        for i in range(len(out) - 1, -1, -1):
            p = out[i]
            if left <= 0:
                break
            if p.cause != cause:
                continue
            take = min(left, p.t1 - p.t0)
            left -= take
            cut = p.t1 - take
            out[i:i + 1] = [q for q in (p._replace(t1=cut), p._replace(t0=cut, cause=Cause.DEVICE_DESCHEDULED,
                                                                        detail=DETAIL)) if q.t1 > q.t0]
    return out
