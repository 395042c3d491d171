"""What to fix first: idle per cause and site, and what removing it is worth.

By the cost model a step's period is its busy time plus its idle, so taking one
cause's idle out of the window shortens the mean period by that idle per step:
the predicted speedup is ``window / (window - idle_of_cause)``. For a blocking
run's commit wait that is the pipelining gain before the zombie tax.
"""
from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from photon_trace.telemetry.analysis.bubbles import Bubble


class Diagnosis(NamedTuple):
    cause: str
    site_or_phase: str
    idle_ns: int
    share: float              # of all bubble idle in the window
    predicted_speedup: float  # throughput ratio with this idle removed


def diagnose(bubbles: list[Bubble], window_ns: int) -> list[Diagnosis]:
    """One row per (cause, detail), most idle first."""
    idle: dict[tuple[str, str], int] = defaultdict(int)
    for b in bubbles:
        idle[(b.cause, b.detail)] += b.duration_ns
    total = sum(idle.values())
    rows = [Diagnosis(cause, detail, ns, ns / total if total else 0.0,
                      window_ns / (window_ns - ns) if window_ns > ns else float("inf"))
            for (cause, detail), ns in idle.items()]
    return sorted(rows, key=lambda d: (-d.idle_ns, d.cause, d.site_or_phase))
