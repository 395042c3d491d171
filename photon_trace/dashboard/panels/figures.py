"""Panels beside the timeline: pure functions from an analysis report to figures and rows.

Rows are lists of dicts (column -> already formatted string) so the layout only
lays them out, and tests read the same values the page shows.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from photon_trace.dashboard.timeline.text import plain
from photon_trace.telemetry.analysis.causes import cause_label, who_fixes
from photon_trace.telemetry.analysis.diagnosis import ranked


def accidental_sync_count(report: Any) -> int:
    """Accidental host syncs in the window: the sum over call sites."""
    return int(sum(s.count for s in (getattr(report, "syncs", None) or [])))


def _diagnoses(report: Any) -> list:
    d = getattr(report, "diagnosis", None)
    if d is None:
        return []
    return list(d) if isinstance(d, (list, tuple)) else [d]


# (key, label, unit, better): better is "lower" or "higher", for colouring differences.
METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("period_ms", "period", "ms", "lower"),
    ("forward_ms", "forward", "ms", "lower"),
    ("sample_ms", "sample", "ms", "lower"),
    ("bookkeeping_ms", "bookkeeping", "ms", "lower"),
    ("idle_fraction", "device idle", "%", "lower"),
    ("no_work_fraction", "no work", "%", "neither"),   # nothing to run (no request): apart from idle
    # the part of it the host caused (the next op not yet enqueued); the rest is launch latency
    ("host_idle_fraction", "idle: host late", "%", "lower"),
    ("tokens_per_s", "tokens/s", "", "higher"),
    ("accidental_syncs", "accidental syncs", "", "lower"),
    ("bubbles", "bubbles", "", "lower"),
    ("L", "L (tokens/sequence)", "", "neither"),  # the workload's, not a quality
    ("z", "z (zombie tax)", "", "lower"),
    # the bound on device times against the host clock: a bubble shorter than it is not sure
    ("clock_error_us", "device clock error", "us", "neither"),
)
IMPORTED_METRICS: tuple[tuple[str, str, str, str], ...] = (
    # another program's trace: no tokens, no requests, no engine phases; steps of its own
    ("steps_per_s", "steps/s", "", "higher"),
    ("period_ms", "step period", "ms", "lower"),
    ("busy_fraction", "device busy", "%", "higher"),
    ("idle_fraction", "device idle", "%", "lower"),
    ("host_idle_fraction", "idle: host late", "%", "lower"),
    ("accidental_syncs", "accidental syncs", "", "lower"),
    ("bubbles", "bubbles", "", "lower"),
    ("clock_error_us", "device clock error", "us", "neither"),
)
"""The cards of an imported trace (``Report.imported``): what means something for any program."""


def metrics_for(*reports: Any) -> tuple[tuple[str, str, str, str], ...]:
    """The metrics that mean something for these reports: ours, or any program's when one is imported."""
    return IMPORTED_METRICS if any(getattr(r, "imported", False) for r in reports) else METRICS


NOISE_REL = 0.05    # times and rates: a single run on a shared machine moves this much (README: Measured)
NOISE_PP = 0.005    # shares (idle): half a percentage point
NOISE_NOTE = (f"A difference is called better or worse only outside the noise band: ±{NOISE_REL:.0%} for times "
              f"and rates, ±{100 * NOISE_PP:.1f} pp for shares (counts: ±{NOISE_REL:.0%} or ±1; accidental syncs: "
              "any); inside it the verdict is "
              "'within noise' (one run on a shared machine moves that much). The period, idle fraction, tokens/s, "
              "forward and sample also need their 95% interval (from each run's steps) to exclude no change, else "
              "'no clear change'.")


def metric_values(report: Any, metrics: tuple = METRICS) -> dict[str, float]:
    """The summary numbers of a report, by ``metrics`` key."""
    out = {}
    for key, *_ in metrics:
        if key == "accidental_syncs":     # a runtime whose syncs cannot be read: unknown, never 0
            out[key] = float("nan") if getattr(report, "syncs_unknown", None) else float(accidental_sync_count(report))
        elif key == "bubbles":
            out[key] = float(len(getattr(report, "bubbles", None) or []))
        else:
            v = getattr(report, key, None)
            out[key] = float(v) if v is not None else float("nan")
    return out


def fmt(value: float, unit: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if unit == "%":
        return f"{100 * value:.1f} %"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "us":
        return f"±{value:.1f} µs"
    if float(value).is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def summary_items(report: Any, ranks: Any = None) -> list[dict[str, str]]:
    """One card per summary metric: label and formatted value; for an imported trace, its own
    cards, with the cause of most idle and the op with most device time (a trace with no device
    op says so, rather than 0 % idle); for a distributed job (``ranks``), its ranks first."""
    metrics = metrics_for(report)
    items = rank_items(ranks) if ranks is not None else []
    if metrics is IMPORTED_METRICS and not getattr(report, "window_ns", 0):
        return items + [{"key": "device", "label": "device activity", "value": "none in the trace"},
                        {"key": "accidental_syncs", "label": "accidental syncs",
                         "value": fmt(float(accidental_sync_count(report)), "")}]
    vals = metric_values(report, metrics)
    items += [{"key": k, "label": label, "value": "unknown" if k == "accidental_syncs" and np.isnan(vals[k])
               else fmt(vals[k], unit)} for k, label, unit, _ in metrics]
    if metrics is IMPORTED_METRICS:
        items += _imported_items(report)
    return items


def rank_items(rr: Any) -> list[dict[str, str]]:
    """A job's cards: how many ranks, and which held the others most often (the most work per step)."""
    out = [{"key": "ranks", "label": "ranks", "value": f"{len(rr.ranks)}"}]
    if rr.steps:
        counts: dict[int, int] = {}
        for s in rr.steps:
            counts[s.slowest] = counts.get(s.slowest, 0) + 1
        top = max(counts, key=lambda r: (counts[r], -r))
        out.append({"key": "slowest_rank", "label": "slowest rank",
                    "value": f"rank {top} · {counts[top]} of {len(rr.steps)} steps"})
    return out


def _imported_items(report: Any) -> list[dict[str, str]]:
    """The cause of most idle and the op with most device time, as cards."""
    totals: dict[str, int] = {}
    for b in getattr(report, "bubbles", None) or []:
        totals[b.cause] = totals.get(b.cause, 0) + b.duration_ns
    idle = getattr(report, "idle_ns", 0) or 0
    top_cause = max(totals, key=totals.get) if totals else None
    cause = (f"{cause_label(top_cause)} · {100 * totals[top_cause] / idle:.0f} %" if top_cause and idle else "–")
    ops = getattr(report, "top_ops", None) or []
    op = f"{_short(ops[0].name, 40)} · {100 * ops[0].share:.0f} %" if ops else "–"
    return [{"key": "top_cause", "label": "idle: top cause", "value": cause},
            {"key": "top_op", "label": "top kernel", "value": op}]


def _short(name: str, n: int) -> str:
    return name if len(name) <= n else name[:n - 1] + "…"


def compare_rows(a: Any, b: Any, comparison: Any = None) -> list[dict[str, str]]:
    """Metric, A, B, the difference B − A and whether B is better, worse or the same; with
    ``comparison`` (``panels/compare.py``), the period, idle fraction and device times are decided
    by their intervals (shown in "95% interval"), and nothing a changed machine moves is decided."""
    from photon_trace.dashboard.panels.compare import decide
    metrics = metrics_for(a, b)
    va, vb = metric_values(a, metrics), metric_values(b, metrics)
    rows = []
    for key, label, unit, better in metrics:
        x, y = va[key], vb[key]
        if np.isnan(x) or np.isnan(y):
            delta, verdict, ratio = "–", "", "–"
        else:
            d = y - x
            if unit == "%":  # a difference of fractions is in percentage points
                delta = f"{100 * d:+.1f} pp" if d else "0"
            elif unit == "us":
                delta = f"{d:+.1f} µs" if d else "0"
            else:
                delta = ("+" if d > 0 else "") + (fmt(d, unit) if d else "0")
            ratio = f"{y / x:.2f}×" if x else "–"
            if better == "neither":
                verdict = ""
            elif d == 0:
                verdict = "same"
            elif _within_noise(key, x, y, unit):
                verdict = "within noise"
            else:
                verdict = "better" if (d < 0) == (better == "lower") else "worse"
        verdict, interval = decide(key, verdict, comparison) if verdict != "same" else (verdict, "")
        row = {"metric": label, "A": fmt(x, unit), "B": fmt(y, unit), "B − A": delta, "B / A": ratio}
        if comparison is not None:
            row["95% interval"] = interval
        rows.append({**row, "verdict": verdict})
    return rows


def _within_noise(key: str, x: float, y: float, unit: str) -> bool:
    if key == "accidental_syncs":
        return False            # one sync more is a bug, never noise (the CI gate fails on it)
    if unit == "%":
        return abs(y - x) <= NOISE_PP
    band = NOISE_REL * max(abs(x), abs(y))
    if unit == "" and float(x).is_integer() and float(y).is_integer():
        band = max(band, 1.0)   # counts: one more is noise
    return abs(y - x) <= band


STEP_TICKS = 12          # up to this many steps, one tick each
ENVELOPE_BUCKETS = 1500   # a long run's per-step series is drawn as each bucket's min and max


def envelope(x: np.ndarray, y: np.ndarray, buckets: int = ENVELOPE_BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``2 * buckets`` points that keep every bucket's lowest and highest value (in step
    order): a 50k-step series reads the same, spikes included, and draws in a fraction of the time."""
    n = len(x)
    if n <= 2 * buckets:
        return x, y
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep = []
    for a, b in zip(edges[:-1], edges[1:]):
        seg = y[a:b]
        keep += sorted({a + int(np.argmin(seg)), a + int(np.argmax(seg))})
    k = np.asarray(keep, dtype=np.int64)
    return x[k], y[k]


def _histogram(values: np.ndarray, colour: str, name: str) -> go.Bar:
    """Binned here (60 bins), so the page gets 60 bars instead of every step's value."""
    finite = values[np.isfinite(values)]
    counts, edges = np.histogram(finite, bins=60) if len(finite) else (np.zeros(0), np.zeros(1))
    mids = (edges[:-1] + edges[1:]) / 2
    return go.Bar(x=mids, y=counts, width=np.diff(edges), name=name, marker_color=colour,
                  customdata=np.column_stack([edges[:-1], edges[1:]]) if len(counts) else None,
                  hovertemplate="%{customdata[0]:.3f}–%{customdata[1]:.3f} ms: %{y} steps<extra></extra>")


def step_series_figure(report: Any, title: str | None = None) -> go.Figure:
    """Period and device idle per step over the run (a long run as a min/max envelope), with
    their histograms."""
    steps = list(getattr(report, "steps", None) or [])
    idx = np.array([s.step for s in steps], dtype=np.int64)
    period = np.array([s.period_ns for s in steps], dtype=np.float64) / 1e6
    idle = np.array([s.idle_ns for s in steps], dtype=np.float64) / 1e6
    # the spacing leaves room for the top row's axis titles under it and the bottom row's
    # subplot titles over it: at 0.12 "idle histogram" was drawn over "period (ms)"
    fig = make_subplots(rows=2, cols=2, column_widths=[0.72, 0.28],
                        horizontal_spacing=0.06, vertical_spacing=0.2,
                        subplot_titles=("period per step" + (" (min/max per bucket of steps)"
                                                             if len(steps) > 2 * ENVELOPE_BUCKETS else ""),
                                        "period histogram", "device idle per step", "idle histogram"))
    mode = "lines" if len(steps) > 1500 else "lines+markers"
    px, py = envelope(idx, period)
    ix, iy = envelope(idx, idle)
    # SVG, not WebGL: at most 2 x ENVELOPE_BUCKETS points a series is one cheap path, and a
    # second WebGL context (set up when the tab opens) cost Panels ~1 s in a software-GL browser
    fig.add_trace(go.Scatter(x=px, y=py, mode=mode, name="period", marker=dict(size=3),
                               line=dict(width=1, color="#2F6DB5"),
                               hovertemplate="step %{x}<br>period %{y:.3f} ms<extra></extra>"), 1, 1)
    fig.add_trace(go.Scatter(x=ix, y=iy, mode=mode, name="idle", marker=dict(size=3),
                               line=dict(width=1, color="#F58518"),
                               hovertemplate="step %{x}<br>idle %{y:.3f} ms<extra></extra>"), 2, 1)
    fig.add_trace(_histogram(period, "#2F6DB5", "period"), 1, 2)
    fig.add_trace(_histogram(idle, "#F58518", "idle"), 2, 2)
    med = getattr(report, "period_ms", None)
    if med:
        fig.add_hline(y=med, line=dict(color="#555", width=1, dash="dash"), row=1, col=1,
                      annotation_text=f"median {med:.3f} ms", annotation_position="top left")
    fig.update_layout(template="plotly_white", height=480, showlegend=False, bargap=0.05,
                      margin=dict(l=60, r=20, t=60 if title else 40, b=40),
                      title=dict(text=plain(title), x=0.01) if title else None, meta={"steps": len(steps)})
    fig.update_yaxes(title_text="ms", row=1, col=1)
    fig.update_yaxes(title_text="ms", row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_xaxes(matches="x", row=2, col=1)   # the two series share steps; the histograms do not
    for row in (1, 2):   # steps are whole: a short trace gets a tick per step, never "1.5"
        fig.update_xaxes(row=row, col=1, tickformat="d",
                         **({"tickmode": "array", "tickvals": [int(s) for s in idx]} if len(idx) <= STEP_TICKS else {}))
    fig.update_xaxes(title_text="period (ms)", row=1, col=2)
    fig.update_xaxes(title_text="idle per step (ms)", row=2, col=2)
    fig.update_yaxes(title_text="steps", row=1, col=2)
    fig.update_yaxes(title_text="steps", row=2, col=2)
    return fig


def fmt_duration(ns: float) -> str:
    """Adaptive units, as on the timeline's axis: 850 ns, 12.3 µs, 4.56 ms, 1.23 s."""
    a = abs(ns)
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if a >= scale:
            return f"{ns / scale:.3g} {unit}" if a < 100 * scale else f"{ns / scale:,.0f} {unit}"
    return f"{ns:.0f} ns"


def bubble_order(report: Any) -> list[int]:
    """Indices of the report's bubbles, costliest first."""
    bubbles = getattr(report, "bubbles", None) or []
    return sorted(range(len(bubbles)), key=lambda i: -(bubbles[i].t1 - bubbles[i].t0))


def bubble_rows(report: Any, origin_ns: int, limit: int = 100) -> list[dict[str, str]]:
    """The costliest bubbles first: when (from window start), step, cause, duration, detail."""
    bubbles = getattr(report, "bubbles", None) or []
    return [{"at": fmt_duration(b.t0 - origin_ns), "step": str(b.step),
             "cause": cause_label(b.cause), "idle": fmt_duration(b.t1 - b.t0),
             "detail": str(getattr(b, "detail", "") or "")}
            for b in (bubbles[i] for i in bubble_order(report)[:limit])]


def bubble_cause_totals(report: Any) -> list[dict[str, str]]:
    """Idle per cause, largest first."""
    tot: dict[str, list[int]] = {}
    for b in getattr(report, "bubbles", None) or []:
        t = tot.setdefault(b.cause, [0, 0])
        t[0] += 1
        t[1] += b.t1 - b.t0
    return [{"cause": cause_label(c), "bubbles": f"{n:,}", "idle (ms)": f"{ns / 1e6:.3f}",
             "who can fix it": who_fixes(c)}
            for c, (n, ns) in sorted(tot.items(), key=lambda kv: -kv[1][1])]


def ranked_diagnoses(report: Any) -> list:
    """What host code can fix, most idle first, then the device's own latency (which it cannot): the
    ranking the command line and ``check`` print too (``telemetry/analysis/diagnosis.py:ranked``)."""
    return ranked(_diagnoses(report))


def diagnosis_rows(report: Any) -> list[dict[str, str]]:
    """Each cause of idle with its call site or phase, what removing it would buy, and who can."""
    return [{"cause": cause_label(d.cause), "call site / phase": str(d.site_or_phase),
             "idle (ms)": f"{d.idle_ns / 1e6:.3f}",
             "charged (ms)": f"{getattr(d, 'charged_ns', d.idle_ns) / 1e6:.3f}", "share": f"{100 * d.share:.1f} %",
             "predicted speedup": _speedup(d.predicted_speedup), "who can fix it": who_fixes(d.cause)}
            for d in ranked_diagnoses(report)]


def _speedup(x: float) -> str:
    return "∞" if x is None or not np.isfinite(x) else f"{x:.2f}×"


def sync_rows(report: Any) -> list[dict[str, str]]:
    """Accidental syncs per call site with what they cost."""
    return [{"call site": s.site, "reason": s.reason, "count": f"{s.count:,}",
             "host wait (ms)": f"{s.wait_ns / 1e6:.3f}", "device idle caused (ms)": f"{s.idle_ns / 1e6:.3f}"}
            for s in sorted(getattr(report, "syncs", None) or [], key=lambda s: -s.idle_ns)]
