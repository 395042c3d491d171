"""The device time per op table of the Panels tab, and the device-side findings above it
(``telemetry/analysis/device_spread.py``): how each op's duration spreads, and which op's slow
tail costs the device's time. Pure: rows from a report."""
from __future__ import annotations

from typing import Any


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def device_op_rows(report: Any) -> list[dict[str, str]]:
    """One row per device op name in the window: count, p50 / p90 / p99, total and the time
    above the median (its share of device time), the costliest tail first."""
    return [{"op": s.op, "count": f"{s.count:,}", "p50 (ms)": _ms(s.p50_ns), "p90 (ms)": _ms(s.p90_ns),
             "p99 (ms)": _ms(s.p99_ns), "total (ms)": _ms(s.total_ns),
             "above the median (ms)": f"{_ms(s.tail_ns)} ({100 * s.tail_share:.0f} %)"}
            for s in getattr(report, "device_ops", None) or []]


def device_finding_lines(report: Any) -> list[str]:
    """The device-side findings' words, costliest first (none: no op's tail costs enough)."""
    return [f.words for f in getattr(report, "device_findings", None) or []]
