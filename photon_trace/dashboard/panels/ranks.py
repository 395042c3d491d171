"""A distributed job's tables: each rank, the slowest rank per step, and what collectives cost.

Pure functions of the job's analysis (``telemetry/analysis/ranks.py:RanksReport``) to rows of
formatted strings, as the other panels are.
"""
from __future__ import annotations

from typing import Any

from photon_trace.dashboard.panels.figures import fmt_duration

COLLECTIVE_ROWS = 20


def rank_rows(rr: Any) -> list[dict[str, str]]:
    """One row per rank: its file, device ops, idle, syncs, overlap and first thing to fix."""
    return [{"rank": str(r.rank), "file": r.file, "device ops": f"{r.device_ops:,}",
             "idle share": f"{100 * r.idle_fraction:.1f} %" if r.idle_fraction is not None else "no device",
             "accidental syncs": "unknown" if r.syncs is None else f"{r.syncs:,}",
             "comm/comp overlap": f"{100 * r.overlap:.2f} %" if r.overlap is not None else "—",
             "first to fix": r.first_fix} for r in rr.ranks]


def step_rows(rr: Any) -> list[dict[str, str]]:
    """Per step: the slowest rank (the most work), by how much, and each rank's time and work."""
    out = []
    for s in rr.steps:
        row = {"step": str(s.step), "slowest rank": str(s.slowest), "by": fmt_duration(s.spread_ns)}
        row.update({f"rank {r}": f"{fmt_duration(s.durations[r])} (work {fmt_duration(s.work[r])})"
                    for r in sorted(s.durations)})
        out.append(row)
    return out


def wait_rows(rr: Any) -> list[dict[str, str]]:
    """Per rank: how often it arrived last, and its collectives' waiting against their transfer."""
    return [{"rank": str(w.rank), "arrived last": f"{w.last} of {w.collectives}",
             "waited for the last rank": fmt_duration(w.wait_ns), "transfer": fmt_duration(w.transfer_ns)}
            for w in rr.waits]


def collective_rows(rr: Any, limit: int = COLLECTIVE_ROWS) -> list[dict[str, str]]:
    """The collectives most waited on: kind, the rank that arrived last, each rank's wait / transfer."""
    worst = sorted(rr.collectives, key=lambda c: -max(c.wait_ns(r) for r in c.starts))[:limit]
    out = []
    for c in worst:
        row = {"collective": f"{c.kind} #{c.index}", "arrived last": f"rank {c.last}"}
        row.update({f"rank {r}": f"waited {fmt_duration(c.wait_ns(r))} / transfer {fmt_duration(c.transfer_ns(r))}"
                    for r in sorted(c.starts)})
        out.append(row)
    return out
