"""Which figures mean something for a trace: our engine's, or any other program's.

Our engine's traces have tokens, requests and named phases (forward, sample, bookkeeping,
L, z). An imported trace of any other program has none of them: a figure made of them
reads "tokens/s 0" or "bookkeeping 315 ms" (its top-level ops summed), true and useless.
For it the figures are steps (iterations) per second, how busy the analysed stream was, idle
by cause, syncs and the ops that took the device's time. The console, ``check``'s summary
and the dashboard's cards all choose through ``Report.imported``; these are the lines the
first two print.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from photon_trace.telemetry.analysis.causes import cause_label
from photon_trace.telemetry.analysis.report import Report


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def idle_by_cause(r: Report) -> list[tuple[str, int]]:
    """(cause label, idle ns) of the window's bubbles, most first."""
    total: Counter = Counter()
    for b in r.bubbles:
        total[b.cause] += b.duration_ns
    return [(cause_label(c), ns) for c, ns in total.most_common()]


def no_work_words(r: Report) -> str:
    """What follows an idle fraction when the window had time with no work (``no_work``): that
    the fraction is of the time with work, and how much had none; nothing otherwise."""
    if not r.no_work_ns:
        return ""
    return (f" of the time with work; {r.no_work_fraction:.1%} of the window had no work "
            f"({_ms(r.no_work_ns)}, not idle)")


def steady_state_lines(r: Report, code: Callable[[str], str]) -> list[str]:
    """The window's key figures as Markdown list items (``check --markdown``); ``code`` quotes a
    string that comes from the trace (an op's name) so that it cannot be markup (``gate.md_code``)."""
    head = (f"- window: {len(r.steps)} steps, {_ms(r.window_ns)}; idle {r.idle_fraction:.2%}{no_work_words(r)} "
            f"(bubbles {_ms(r.bubble_ns)}, dispatch gaps {_ms(r.dispatch_ns)}; "
            f"host late {_ms(r.host_idle_ns)}, launch latency {_ms(r.launch_idle_ns)})")
    if not r.imported:
        return [head,
                f"- median per step: period {r.period_ms:.3f} ms, forward {r.forward_ms:.3f} ms, "
                f"sample {r.sample_ms:.3f} ms, bookkeeping {r.bookkeeping_ms:.3f} ms",
                f"- tokens/s: {r.tokens_per_s:,.1f} steady, {r.e2e_tokens_per_s:,.1f} end to end; "
                f"L {r.L:.1f}, z {r.z:.4f}"]
    causes = ", ".join(f"{label} {_ms(ns)}" for label, ns in idle_by_cause(r)[:4]) or "no bubbles"
    out = [head,
           f"- steps per second: {r.steps_per_s:,.2f} (median step {r.period_ms:.3f} ms); "
           f"{r.stream} busy {r.busy_fraction:.1%}",
           f"- idle by cause: {causes}"]
    if r.top_ops:
        out.append("- top ops by device time: " + ", ".join(
            f"{code(_short(o.name))} {_ms(o.total_ns)} ({o.share:.0%}, {o.count:,}x)" for o in r.top_ops[:3]))
    return out


def _short(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[:n - 1] + "…"
