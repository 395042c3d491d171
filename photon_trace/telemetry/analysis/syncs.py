"""Accidental synchronisations, grouped by call site, with what they cost.

A sync is a host wait the design did not expect (``expected=False``). Its cost is
the device idle of the bubbles attributed to its site (see ``bubbles``), which
is more than the wait itself overlaps: after a drain the device also idles
while the host does the rest of its work serially.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import NamedTuple

from photon_trace.telemetry.analysis.bubble_table import Bubbles
from photon_trace.telemetry.analysis.bubbles import Bubble
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.trace.records import Trace


class SyncSite(NamedTuple):
    site: str       # file:line
    reason: str     # the most frequent reason recorded there
    count: int
    wait_ns: int    # host time spent waiting there
    idle_ns: int    # device idle attributed to it


def sync_sites(trace: Trace, bubbles: list[Bubble], window: tuple[int, int] | None = None) -> list[SyncSite]:
    """Unexpected waits overlapping ``window`` (all of them when None), one row per site, costliest first."""
    reasons: dict[str, Counter] = defaultdict(Counter)
    wait_ns: dict[str, int] = defaultdict(int)
    for w in trace.waits:
        if w.expected:
            continue
        if window is not None and not (w.t0 < window[1] and w.t1 >= window[0]):
            continue
        reasons[w.site][w.reason] += 1
        wait_ns[w.site] += w.t1 - w.t0
    idle: dict[str, int] = defaultdict(int)
    if isinstance(bubbles, Bubbles):    # summed per row over the columns
        for (cause, detail), ns in bubbles.per_row().items():
            if cause == Cause.ACCIDENTAL_SYNC:
                idle[detail] += ns
    else:
        for b in bubbles:
            if b.cause == Cause.ACCIDENTAL_SYNC:
                idle[b.detail] += b.duration_ns
    rows = [SyncSite(site, c.most_common(1)[0][0], sum(c.values()), wait_ns[site], idle[site])
            for site, c in reasons.items()]
    return sorted(rows, key=lambda s: (-s.idle_ns, -s.wait_ns, s.site))
