"""A gap's parts, and the rules that cut and label them: a late start of queued work, a sync's
charge on the host time it delays, a stretch given to the device's own tail. ``attribution``
decides which rule applies where; these say what each does to a list of parts in time order."""
from __future__ import annotations

from typing import NamedTuple

from photon_trace.telemetry.analysis.causes import Cause

LAUNCH_LATENCY = "launch latency"
"""``dispatch``'s detail: the op was queued and the device started it late."""
GRAPH_NODES = "between a graph launch's nodes"
"""``dispatch``'s detail for a gap between two ops of one graph launch (one enqueue for all of
them): the graph's own scheduling, not a launch the host made."""
WOKE_AFTER_NO_WORK = "device worker waking after no work"
"""``device_descheduled``'s detail for the late start of the first op after the engine had no work."""


class Part(NamedTuple):
    """One stretch of a gap with one cause (full gap coordinates, before window clipping)."""
    t0: int
    t1: int
    cause: Cause
    detail: str


def late_start(e: int, x: int, late: list[Part], launch: int | None, detail: str = LAUNCH_LATENCY,
                left: dict[str, int] | None = None, woke: bool = False) -> list[Part]:
    """[e, x): queued work not started. The device's own launch latency ``launch`` is
    ``dispatch`` (``detail``); any excess (a device that ran dry starts later) goes to the host-late
    part's largest cause, whose lateness let it run dry (all ``dispatch`` without a measured latency),
    unless it ran dry for want of work (``woke``): then no host code left it dry, and the excess is
    its worker waking from the sleep, the machine's (``device_descheduled``; a paced client's run,
    where a VM's idle core took ~4 ms to wake it, failed the idle gate as host code at launch).
    A sync takes only what is ``left`` of its charge (site -> ns; "What a sync costs": up to its
    wait in all, which its removal moves the host by, and nothing after it by more); the rest goes
    to the largest cause that is no sync (``dispatch`` where there is none)."""
    if x <= e:
        return []
    share: dict[tuple[Cause, str], int] = {}
    if launch is not None:
        for t0, t1, cause, why in late:
            if cause != Cause.DEVICE_BUSY:     # the host's lateness let the device run dry
                key = (cause, why)
                share[key] = share.get(key, 0) + t1 - t0
    if not share or launch is None:
        return [Part(e, x, Cause.DISPATCH, detail)]
    own = min(x - e, launch)
    largest = max(share.items(), key=lambda kv: kv[1])[0]
    if woke:
        largest = (Cause.DEVICE_DESCHEDULED, WOKE_AFTER_NO_WORK)
    end = x - own
    out = [Part(e, end, *largest)]
    if largest[0] == Cause.ACCIDENTAL_SYNC and left is not None:
        took = min(end - e, left.get(largest[1], 0))
        others = [kv for kv in share.items() if kv[0][0] != Cause.ACCIDENTAL_SYNC]
        rest = max(others, key=lambda kv: kv[1])[0] if others else (Cause.DISPATCH, LAUNCH_LATENCY)
        out = [Part(e, e + took, *largest), Part(e + took, end, *rest)]
    return merged(out + [Part(end, x, Cause.DISPATCH, LAUNCH_LATENCY)])


def moves(p: Part, phases: frozenset[str]) -> bool:
    """Whether ``p`` is host time a sync's removal moves earlier: host work (a phase's, or outside
    the phases), or a phase's time the host did not run (a sleep, the GIL, the run queue: it starts
    ``w`` earlier too). Not an expected wait's, whose end the device's copy sets."""
    return p.cause == Cause.HOST_BOUND or (p.cause in (Cause.HOST_BLOCKED, Cause.HOST_DESCHEDULED)
                                           and p.detail in phases)


def charge(parts: list[Part], start: int, budget: int, site: str, phases: frozenset[str],
            shared: list[Part] | None = None) -> tuple[list[Part], int]:
    """Give ``site`` up to ``budget`` of the host time a sync delays (``moves``) from ``start`` on;
    (parts, budget left). Each stretch given, under its own label, goes to ``shared``."""
    out: list[Part] = []
    sync = Cause.ACCIDENTAL_SYNC
    for i, p in enumerate(parts):
        if budget <= 0:     # spent: the rest as it is (one list copy, not a loop of appends)
            out += parts[i:]
            break
        t0, t1, cause, detail = p
        if t1 <= start or not moves(p, phases):
            out.append(p)
            continue
        x = max(t0, start)
        take = min(budget, t1 - x)
        if x > t0:
            out.append(Part(t0, x, cause, detail))
        last = out[-1] if out else None
        if last is not None and last[1] == x and last[2] == sync and last[3] == site:
            out[-1] = Part(last[0], x + take, sync, site)   # a charge over many spans: one part
        else:
            out.append(Part(x, x + take, sync, site))
        if shared is not None:
            shared.append(Part(x, x + take, cause, detail))
        if x + take < t1:
            out.append(Part(x + take, t1, cause, detail))
        budget -= take
    return merged(out), max(budget, 0)


def relabel(parts: list[Part], a: int, b: int, cause: str, detail: str) -> list[Part]:
    """``parts`` (in time order) with [a, b) given to (``cause``, ``detail``), but for a wait
    on a copy the next op needs (``copy_wait``, ``stream_wait``: the more specific cause)."""
    if b <= a:
        return parts
    out = []
    for p in parts:
        if p.t1 <= a or p.t0 >= b or p.cause in (Cause.COPY_WAIT, Cause.STREAM_WAIT):
            out.append(p)
            continue
        out += [p._replace(t1=a), Part(max(p.t0, a), min(p.t1, b), cause, detail), p._replace(t0=b)]
    return merged(out)


def merged(parts: list[Part]) -> list[Part]:
    """``parts`` without empty ones, adjacent ones of one label joined. On every gap's parts,
    several times a gap (a step's launches on an Nsight export are ~150 parts a gap): plain
    tuple unpacking, no ``_replace`` or slices."""
    out: list[Part] = []
    last = None
    for p in parts:
        t0, t1, cause, detail = p
        if t1 <= t0:
            continue
        if last is not None and last[1] == t0 and last[2] == cause and last[3] == detail:
            last = out[-1] = Part(last[0], t1, cause, detail)
        else:
            out.append(p)
            last = p
    return out
