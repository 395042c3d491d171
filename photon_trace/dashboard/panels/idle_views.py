"""The two views of device idle side by side, and nsys analyze's expert rules, as table rows.

Per stream is ours (a stream idle between its own ops, whatever the others do), per device
is Nsight's (a device idle only while none of its streams runs); the rules are nsys's own,
under its names (``telemetry/analysis/gpu_rules.py:expert_rules``). Pure functions of the
report and the rules: no trace is touched.
"""
from __future__ import annotations

from typing import Any

from photon_trace.dashboard.panels.figures import fmt_duration

RULE_DETAIL_ROWS = 10


def idle_view_rows(report: Any) -> list[dict[str, str]]:
    """One row per stream, then one per device, over the analysis window."""
    rows = [{"view": "per stream (ours)", "lane": s.stream, "ops": f"{s.ops:,}", "span": fmt_duration(s.span_ns),
             "idle": fmt_duration(s.idle_ns), "idle share": f"{100 * s.idle_fraction:.1f} %"}
            for s in getattr(report, "streams", None) or []]
    rows += [{"view": f"per device, {d.streams} stream{'s' if d.streams > 1 else ''} together (Nsight's)",
              "lane": d.device, "ops": f"{d.ops:,}", "span": fmt_duration(d.span_ns),
              "idle": fmt_duration(d.idle_ns), "idle share": f"{100 * d.idle_fraction:.1f} %"}
             for d in getattr(report, "devices", None) or []]
    return rows


def rule_rows(rules: list) -> list[dict[str, str]]:
    """One row per rule: what nsys calls it, and what it found."""
    return [{"rule": r.name, "nsys title": r.title, "found": f"{r.count:,}",
             "total": fmt_duration(r.total_ns) if r.count else "—"} for r in rules]


def rule_detail_rows(rule: Any, limit: int = RULE_DETAIL_ROWS, origin_ns: int = 0) -> list[dict[str, str]]:
    """A rule's first rows in nsys's columns (durations in adaptive units, starts from ``origin_ns``)."""
    out = []
    for row in rule.rows[:limit]:
        cells = {}
        for col, v in zip(rule.columns, row):
            if col == "Duration":
                cells[col] = fmt_duration(v)
            elif col == "Start":
                cells[col] = fmt_duration(v - origin_ns)
            elif col == "In-Use (%)":
                cells[col] = f"{v:.1f} %"
            else:
                cells[col] = str(v)
        out.append(cells)
    return out
