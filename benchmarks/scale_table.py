"""``bench_scale.py``'s tables: one Markdown row per trace, each figure beside its target and a
PASS or MISS (a figure that could not be measured says why, and is a MISS)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from scale_runs import Measured


def _s(x: float | None) -> str:
    """Seconds: two decimals, three under a tenth (a 28-event profile takes milliseconds)."""
    return "-" if x is None else f"{x:.3f}" if x < 0.1 else f"{x:.2f}"


@dataclass
class Row:
    name: str
    cells: list[str]
    target: str
    passed: bool
    why: str = ""       # a measurement that failed: what happened

    @classmethod
    def real(cls, name: str, ours: dict[str, Measured], hta: Measured | None, limit_s: float | None,
             ratio_max: float) -> Row:
        gate, why = ours["gate"].get("gate"), _failures(ours)
        cold = ours["gate-cold"].get("gate") if "gate-cold" in ours else None
        their = hta.get("hta") if hta is not None else None
        ratio = gate / their if gate is not None and their else None
        ratio_cold = cold / their if cold is not None and their else None
        checks, target = [], []
        if limit_s is not None:
            checks.append(gate is not None and gate <= limit_s)
            target.append(f"<= {limit_s} s")
        if hta is not None:
            checks.append(ratio is not None and ratio <= ratio_max)
            target.append(f"ours/HTA <= {ratio_max}")
            why = why or hta.failed
        cells = [f"{ours['import'].info.get('spans', '-'):,}" if ours["import"].info else "-",
                 _s(ours["import"].get("import")), _s(ours["analysis"].get("analysis")),
                 _s(_sum(ours["analysis"], "import", "analysis")),
                 _s(gate), _s(cold), f"{ours['gate'].rss_mb:.0f}", _s(their),
                 f"{hta.rss_mb:.0f}" if hta is not None else "-", _s(ratio), _s(ratio_cold)]
        return cls(name, cells, " and ".join(target) or "-", all(checks) if checks else True, why)

    @classmethod
    def scale(cls, name: str, ours: dict[str, Measured], limit_s: float, limit_mb: float) -> Row:
        get = {st: (ours[st].get(st) if st in ours else None) for st in ("import", "analysis", "gate")}
        spans = next((m.info["spans"] for m in ours.values() if "spans" in m.info), None)
        rss = max((m.rss_mb for m in ours.values()), default=0.0)
        imp_an = _sum(ours["analysis"], "import", "analysis") if "analysis" in ours else None
        ok = get["gate"] is not None and get["gate"] <= limit_s and rss <= limit_mb
        cells = ["-" if spans is None else f"{spans:,}", _s(get["import"]), _s(imp_an), _s(get["gate"]),
                 " / ".join(f"{ours[st].rss_mb:.0f}" if st in ours else "-" for st in ("import", "analysis", "gate"))]
        return cls(name, cells, f"gate <= {limit_s:.0f} s, RSS <= {limit_mb:.0f} MB", ok, _failures(ours))

    @classmethod
    def dashboard(cls, name: str, m: Measured, page_s: float | None, open_s: float, zoom_s: float) -> Row:
        sec = m.seconds if not m.failed else {}
        opened = sum(sec[k] for k in ("import", "window", "prepare", "first_draw")) if sec else None
        ok = opened is not None and opened <= open_s and sec["zoom"] <= zoom_s
        after = sec["analysis"] + sec["bubbles"] if "bubbles" in sec else None
        cells = [_s(sec.get("import")), _s(sec.get("window")), _s(sec.get("prepare")), _s(sec.get("first_draw")),
                 _s(opened), _s(sec.get("zoom")), f"{m.info.get('mode', '-')} / {m.info.get('zoom_mode', '-')}",
                 _s(after), f"{m.rss_mb:.0f}", _s(page_s)]
        return cls(name, cells, f"open <= {open_s:.0f} s, zoom <= {zoom_s:.0f} s", ok, m.failed)

    @classmethod
    def fit(cls, name: str, m: Measured) -> Row:
        """A refusal passes when it is bad input (exit 2) that says how much memory is needed, not
        one that ran out (a ``MemoryError`` while reading is exit 2 as well, and no refusal)."""
        code = m.info.get("exit_code")
        said = m.info.get("verdict", "")
        ok = (not m.failed and code == 2 and "memory" in said.lower() and "MemoryError" not in said
              and re.search(r"\d\s*[GM]i?B", said) is not None)
        cells = [str(code if code is not None else "-"), _s(m.get("gate")), f"{m.rss_mb:.0f}",
                 (said[-150:] if len(said) > 150 else said) or "-"]
        return cls(name, cells, "exit 2 saying what it needs", ok, m.failed)


HEADS = {
    "real": ["spans", "import s", "analysis s", "import + analysis s", "import + analysis + gate s",
             "the same, our modules imported in the clock s", "peak RSS MB", "HTA s", "HTA peak RSS MB",
             "ours/HTA", "ours/HTA, our imports in the clock"],
    "scale": ["spans", "import s", "import + analysis s", "import + analysis + gate s",
              "peak RSS MB (import / + analysis / + gate)"],
    "dashboard": ["import s", "window s", "prepare_spans s", "first view s",
                  "open s (import + window + prepare + view)", "zoom 1% s", "draw modes",
                  "then analysis + bubbles s", "peak RSS MB", "browser s"],
    "fit": ["exit", "seconds", "peak RSS MB", "said"],
}


def _sum(m: Measured, *parts: str) -> float | None:
    """The sum of ``parts``' medians, or None when any is missing."""
    got = [m.get(p) for p in parts]
    return None if None in got else sum(got)


def _failures(ours: dict[str, Measured]) -> str:
    return "; ".join(f"{st}: {m.failed}" for st, m in ours.items() if m.failed)


def table(title: str, kind: str, rows: list[Row]) -> str:
    """A Markdown table of ``rows`` under ``title``; ``kind`` names its columns (``HEADS``)."""
    if not rows:
        return f"### {title}\n\n(nothing measured)"
    head = ["trace", *HEADS[kind], "target", "verdict"]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        verdict = "PASS" if r.passed else "MISS" + (f" ({r.why})" if r.why else "")
        lines.append("| " + " | ".join([r.name, *r.cells, r.target, verdict]) + " |")
    return "\n".join(lines)
