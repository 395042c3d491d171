"""A gap a sync's carried charge covers whole, split without the general rules' passes.

On our own trace with the mask-upload bug every gap enters with the upload's charge carried
(``attribution``, "What a sync costs"; the host regains its lead ~100 times in 194k gaps at a
million spans), and the charge is larger than the gap's host work: the whole host-late part
becomes the sync's, the queued part is its late start. ``Attribution.split`` reaches that answer
through the general rules (``charge`` over the coverage, each new wait's own stretch and charge,
``late_start``'s shares, ``merged`` three times, the device worker's split), ~60 us a gap. Here
that one case is recognised and its answer written directly; anything else (no carry, a carry
the host work outruns, any stretch but host work or that sync, a copy waited for, no work,
a device that runs one op at a time) is left to ``split`` (None), with the state untouched.

What ``split`` would do, step by step, for such a gap (``g0``, ``g1``, the host-late end ``e``):

* the carry charges each host-work stretch of [g0, e) whole (its budget covers them all), so the
  host-late part is one ``accidental_sync`` part of the carry's site; the stretches it took are
  ``shared`` as they were labelled;
* a new unexpected wait reaching the part has as its own stretch its overlap with that part
  (same site only) and nothing left to charge in the gap: its remainder becomes the carry;
* the queued part [e, g1): with a launch latency, the sync (the only cause of the host-late
  part) takes the excess over it up to what is left of the charge at that site, ``dispatch``
  the rest; without one, all ``dispatch``;
* the device worker's run-queue split leaves a gap with a sync part whole.

``tests/test_analysis_carried.py`` checks this against ``split`` gap by gap, state included.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.gap_parts import GRAPH_NODES, LAUNCH_LATENCY, Part
from photon_trace.telemetry.trace.records import DeviceSpan

SYNC, HOST, DISPATCH = Cause.ACCIDENTAL_SYNC, Cause.HOST_BOUND, Cause.DISPATCH


class Carry(NamedTuple):
    """A sync's lost host time not yet charged: it may still cost the next gaps."""
    site: str
    left_ns: int


def carried_split(att: Any, prev: DeviceSpan, nxt: DeviceSpan, waited: bool | None, make: Any) -> Any:
    """``att.split(prev, nxt, waited)`` where the carried charge covers the gap (module docstring),
    the state left as it leaves it; None, the state untouched, for any other gap. ``att`` is the
    ``attribution.Attribution`` and ``make`` its ``GapSplit``: this module lies below it."""
    carry = att._carry
    if carry is None or att.serial or att.no_work:
        return None
    g0, g1, enqueued = prev.t1, nxt.t0, nxt.enqueued
    e = min(max(enqueued, g0), g1)
    if e <= g0:
        return None
    regained, chain_from = att._regained(g1)
    if regained:
        return None
    summed = att._timeline.summed(min(chain_from, g0), g0, e)
    if summed is None:
        return None
    chain, after = summed
    site = carry.site
    left = carry.left_ns
    shared = []
    for t0, t1, cause, detail in after:
        if cause == HOST:
            t0 = t0 if t0 > g0 else g0
            left -= t1 - t0
            shared.append(Part(t0, t1, cause, detail))
        elif cause != SYNC or detail != site:
            return None
    if left < 0:        # the host work outran the charge: part of it stays its own
        return None
    if e < g1 and (att._copy_waited(e, g1, nxt) if waited is None else waited):
        return None
    # from here on, the gap is this case: the state moves as ``split`` moves it
    att._shared = shared
    carry = Carry(site, left) if left > 0 else None
    if len(att.unexpected):
        charged = att._charged
        for w in [w for w in att.unexpected.overlapping_list(g0 - att.slack - 1, e) if w not in charged]:
            charged.add(w)
            own = min(e, w.t1) - max(g0, w.t0) if w.site == site and g0 < w.t1 and e > w.t0 else 0
            if w.t1 - w.t0 - own > 0:
                carry = Carry(w.site, w.t1 - w.t0 - own)
    one_launch = att.one_launch(prev, nxt)
    launch = None if one_launch else att.launch.of(prev, nxt)
    if e == g1:
        parts = [Part(g0, e, SYNC, site)]
    elif launch is None:
        parts = [Part(g0, e, SYNC, site), Part(e, g1, DISPATCH, GRAPH_NODES if one_launch else LAUNCH_LATENCY)]
    else:
        end = g1 - min(g1 - e, launch)
        took = min(end - e, carry.left_ns if carry is not None and carry.site == site else 0)
        if took > 0:        # ``_spend``: the late start given to the sync counts against its charge
            carry = Carry(site, carry.left_ns - took) if carry.left_ns > took else None
        x = e + took
        parts = [Part(g0, x, SYNC, site)]
        if x < g1:
            parts.append(Part(x, g1, DISPATCH, LAUNCH_LATENCY))
    att._carry = carry
    att._last = (g1, min(enqueued, e))
    return make(prev, nxt, parts, e - g0, chain, False, launch, 0, 0, tuple(shared))
