"""The Compare tab's verdicts where intervals decide them: the period, the idle fraction, tokens/s
and the device's time per op, from ``telemetry/analysis/comparison.py``, as the rows the table shows.

A row of ``figures.compare_rows`` whose metric has an interval here takes its verdict from it
("better" / "worse" only when the interval excludes no change and the difference exceeds the
band, else "no clear change") and shows the interval; when the pair is not valid (the machine
changed, or was too busy) no time or share gets a verdict at all: "not valid", with the reason
above the table. Counts (accidental syncs, bubbles) keep their own rule.
"""
from __future__ import annotations

from typing import Any

from photon_trace.telemetry.analysis.comparison import Comparison, Difference, compare

NOT_VALID = "not valid"

BY_METRIC = {"period_ms": "period", "idle_fraction": "idle_fraction", "forward_ms": "forward", "sample_ms": "sample",
             "tokens_per_s": "tokens_per_s"}
"""Compare-table metric key -> the comparison's difference that decides its verdict."""

UNDECIDABLE = frozenset({"period_ms", "forward_ms", "sample_ms", "bookkeeping_ms", "idle_fraction",
                         "host_idle_fraction", "tokens_per_s", "steps_per_s", "busy_fraction"})
"""The metrics a changed machine moves: no verdict on them when the pair is not valid."""


def comparison_of(a: Any, b: Any, headers: tuple[dict, dict] = ({}, {})) -> Comparison | None:
    """The comparison of two reports (None when either has no steps to compare: a live view's start)."""
    try:
        return compare(a, b, host_runs=tuple((h or {}).get("host_run") for h in headers))
    except (ValueError, AttributeError):
        return None


def interval_text(d: Difference) -> str:
    """B − A's 95% interval in the table's units."""
    if d.unit == "%":
        return f"{100 * d.delta.low:+.1f} to {100 * d.delta.high:+.1f} pp"
    if d.unit == "/s":
        return f"{d.delta.low:+,.0f} to {d.delta.high:+,.0f}"
    return f"{d.delta.low:+.3f} to {d.delta.high:+.3f} ms"


def decide(key: str, verdict: str, c: Comparison | None) -> tuple[str, str]:
    """(verdict, interval) of a compare-table row: the interval's where it has one, "not valid" on
    a changed machine, the noise band's (``verdict``) otherwise."""
    if c is None:
        return verdict, ""
    if not c.valid and key in UNDECIDABLE:
        return NOT_VALID, ""
    d = c.get(BY_METRIC[key]) if key in BY_METRIC else None
    if d is None:
        return verdict, ""
    return ("" if verdict == "" else d.verdict), interval_text(d)


def validity_text(c: Comparison | None) -> str:
    """The line above the table: why the pair cannot be compared, or how its verdicts were reached."""
    if c is None:
        return "No intervals: a run has no steps in its window."
    if not c.valid:
        return f"NOT A VALID COMPARISON: {c.why_not}."
    if not c.same_workload:
        return (f"Not the same workload ({', '.join(c.workload_differs[:4])} differ): the device's time is part of "
                f"the difference, not a test of the machine.")
    return ("The device's time per op is the same within its noise in both runs: the machine did not change "
            "between them.")
