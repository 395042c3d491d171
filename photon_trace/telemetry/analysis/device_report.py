"""How ``check`` says device time: the console's lines and the Markdown summary's sections.

Pure functions of the ``Report`` s (``device_spread`` made their rows). The device's own slow tail
is a device-side finding, said apart from the bubbles' diagnosis (what host code can fix); against
a baseline, each op's median beside the baseline's (``device_spread.compare_ops``), so a device
that got slower in one op shows even where the period hides it. Neither is a gate: device speed on
a shared machine moves with its load, and what makes a device-time difference a verdict is the
baseline comparison's business (its intervals), not this listing's.
"""
from __future__ import annotations

from collections.abc import Callable

from photon_trace.telemetry.analysis.device_spread import TAIL_SHARE, compare_ops
from photon_trace.telemetry.analysis.report import Report

OPS_LISTED = 6


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _change(ratio: float) -> str:
    return "new" if ratio == float("inf") else f"{ratio - 1:+.1%}"


def device_lines(report: Report | None, baseline: Report | None = None, tolerance: float | None = None) -> list[str]:
    """The console's lines: each device-side finding, then (with a baseline) each op's median
    against the baseline's, those grown beyond ``tolerance`` marked."""
    if report is None:
        return []
    out = [f"device-side: {f.words} (its time above the median: {_ms(f.tail_ns)})" for f in report.device_findings]
    if baseline is not None:
        rows = compare_ops(baseline.device_ops, report.device_ops)[:OPS_LISTED]
        if rows:
            out.append("device time per op, median vs baseline: " + ", ".join(
                f"{c.op} {_ms(c.new_p50_ns)} vs {_ms(c.old_p50_ns)} ({_change(c.ratio)}"
                + (", SLOWER" if tolerance is not None and c.ratio > 1 + tolerance else "") + ")" for c in rows))
    return out


def device_markdown(report: Report | None, baseline: Report | None, code: Callable[[str], str],
                    tolerance: float | None = None) -> list[str]:
    """The Markdown sections: device time per op (the spread, and the baseline's median beside it),
    and the device-side findings; ``code`` quotes an op's name (it comes from the trace)."""
    if report is None or not report.device_ops:
        return []
    base = {c.op: c for c in compare_ops(baseline.device_ops, report.device_ops)} if baseline is not None else {}
    head = "| op | count | p50 | p90 | p99 | total | above the median |"
    out = ["", "## Device time per op", "", head + (" baseline p50 | change |" if base else ""),
           "|---" * (7 + (2 if base else 0)) + "|"]
    for s in report.device_ops[:OPS_LISTED * 2]:
        row = (f"| {code(s.op)} | {s.count} | {_ms(s.p50_ns)} | {_ms(s.p90_ns)} | {_ms(s.p99_ns)} | "
               f"{_ms(s.total_ns)} | {_ms(s.tail_ns)} ({s.tail_share:.0%}) |")
        if base:
            c = base[s.op]
            slower = tolerance is not None and c.ratio > 1 + tolerance
            row += f" {_ms(c.old_p50_ns)} | {'**' if slower else ''}{_change(c.ratio)}{'**' if slower else ''} |"
        out.append(row)
    if report.device_findings:
        out += ["", f"## Device-side: slow tails (an op's time above its median at least {TAIL_SHARE:.0%} of "
                    f"device time; not fixable from host code)", ""]
        out += [f"- {code(f.words)}" for f in report.device_findings]
    return out
