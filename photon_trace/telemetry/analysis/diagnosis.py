"""What to fix first: idle per cause and site, and what removing it is worth.

A row's ``idle_ns`` is the idle charged to it (its bubbles, ``attribution``): the rows
add up to the bubbles. What *removing* a row gives is another question, answered per
row alone: by the cost model a fix shortens the window by the idle it removes, and
the predicted speedup is ``window / (window - removable)``.

**What a fix removes.** Take the row's host time out of the host's timeline (a sync's
wait, a phase's work, a stall): everything the host did after it moves earlier by as
much, so the next gap's host-late part shrinks by up to that (the *chain*: the row's
host time since the previous gap, ``GapSplit.chain``). What one gap does not absorb
moves the host ahead for the next gaps, until the host is ahead of the device anyway
(a step began with its first op queued early: the shift is then worth nothing). A gap
the shift leaves with host-late time shrinks by what it took; a gap cleared of it
would have had its op queued in time, so it shrinks to the device's launch latency
where the host is on time (``Splits.launch_ns``, measured in the same trace), not to 0.
The range: **low** keeps a cleared gap's launch latency after the late enqueue as
measured; **high** closes a cleared gap entirely. Rows the device made (``copy_wait``,
``dispatch``) are predicted as their own idle removed.

Not modelled, so outside the range: the device running at another speed once the fix
changes how it idles (a worker that sleeps through long bubbles comes back to cold
caches; on a shared CPU, a host that sleeps leaves the device more of it).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from photon_trace.telemetry.analysis.attribution import QUEUED_CAUSES, GapSplit
from photon_trace.telemetry.analysis.bubbles import Gap, bubbles_of


class Diagnosis(NamedTuple):
    cause: str
    site_or_phase: str
    idle_ns: int
    share: float              # of all bubble idle in the window
    predicted_speedup: float  # throughput ratio with this row removed (point estimate)
    speedup_low: float = 0.0  # the range (see the module docstring)
    speedup_high: float = 0.0


class Removal(NamedTuple):
    """What removing some rows together is predicted to give."""
    removable_ns: int
    speedup: float
    low: float
    high: float


def _speedup(window_ns: int, removed: float) -> float:
    return window_ns / (window_ns - removed) if window_ns > removed else float("inf")


def predict_removal(splits: list[tuple[Gap, GapSplit]], window_ns: int, rows: Iterable[tuple[str, str]],
                    launch_ns: int = 0) -> Removal:
    """What removing ``rows`` ((cause, detail) pairs) together is predicted to give (see the
    module docstring); ``splits`` from ``bubbles.split_gaps``, ``launch_ns`` its ``launch_ns``."""
    rows = set(rows)
    device_rows = {r for r in rows if r[0] in QUEUED_CAUSES}
    shift = 0
    point = low = high = 0.0
    for gap, s in splits:
        inside = (gap.t1 - gap.t0) / gap.full_ns     # the share of the gap inside the window
        own = sum(p.t1 - p.t0 for p in s.parts if (p.cause, p.detail) in device_rows) * inside
        point, low, high = point + own, low + own, high + own
        if s.regained:
            shift = 0
        shift += sum(ns for key, ns in s.chain.items() if key in rows)
        late = s.host_late_ns
        if late == 0 or shift == 0:
            continue
        cut = min(shift, late)
        shift -= cut
        if cut < late:
            p = lo = hi = cut
        else:   # cleared: the op would have been queued, and started after the clean launch latency
            full = gap.full_ns
            p, lo, hi = full - min(full, launch_ns), full - min(full, max(launch_ns, full - late)), full
        point, low, high = point + p * inside, low + lo * inside, high + hi * inside
    return Removal(int(point), _speedup(window_ns, point), _speedup(window_ns, low), _speedup(window_ns, high))


def diagnose(splits: list[tuple[Gap, GapSplit]], window_ns: int, launch_ns: int = 0) -> list[Diagnosis]:
    """One row per (cause, detail) of the gaps' bubbles, most idle first, each with what
    removing it alone would give."""
    idle: dict[tuple[str, str], int] = defaultdict(int)
    for gap, s in splits:
        for b in bubbles_of(gap, s):
            idle[(b.cause, b.detail)] += b.duration_ns
    total = sum(idle.values())
    rows = []
    for key, ns in idle.items():
        r = predict_removal(splits, window_ns, [key], launch_ns)
        rows.append(Diagnosis(*key, ns, ns / total if total else 0.0, r.speedup, r.low, r.high))
    return sorted(rows, key=lambda d: (-d.idle_ns, d.cause, d.site_or_phase))
