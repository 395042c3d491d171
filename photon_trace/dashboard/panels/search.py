"""Find things on a timeline: a step number, an op or phase name, a bubble cause, a call site.

``search(data, query)`` returns ``(label, selection)`` hits for the page to list; a hit
selects and brings into view what it names (``selection.py``).
"""
from __future__ import annotations

import numpy as np

from photon_trace.dashboard.panels.figures import fmt_duration
from photon_trace.dashboard.timeline.data import TimelineData

MAX_HITS = 20


def step_range(data: TimelineData, step: int) -> tuple[int, int] | None:
    """From step ``step``'s launch to the next step's launch (its period), in ns."""
    k = np.flatnonzero(data.step_ids == step)
    if not len(k):
        return None
    k = int(k[0])
    end = int(data.step_t0[k + 1]) if k + 1 < len(data.step_t0) else data.t_max
    return int(data.step_t0[k]), max(end, int(data.step_t0[k]) + 1)


def search(data: TimelineData, query: str) -> tuple[list[tuple[str, dict]], str]:
    """Hits for ``query`` and a one-line summary of what matched."""
    q = (query or "").strip()
    if not q:
        return [], ""
    if q.lstrip("-").isdigit():
        r = step_range(data, int(q))
        if r is None:
            return [], f"no step {q} in this trace"
        return [(f"step {q}", {"kind": "range", "a": r[0], "b": r[1]})], f"step {q}"
    ql = q.lower()
    hits: list[tuple[str, dict]] = []
    sm = data.syncs
    sync_k = [k for k in range(len(sm)) if ql in sm.site[k].lower() or ql in sm.reason[k].lower()]
    for k in sync_k[:MAX_HITS]:
        hits.append((f"sync {sm.site[k]} · step {int(sm.step[k])}", {"kind": "sync", "k": int(k)}))
    summary = [f"{len(sync_k):,} accidental syncs at a matching call site"] if sync_k else []
    for st in data.sets:
        by_name = ql in st.name.lower()
        by_text = st.text is not None and not by_name
        if by_text:
            idx = np.flatnonzero(st.text.matching(lambda t: ql in t.lower()))   # once per distinct text
        else:
            idx = np.arange(len(st)) if by_name else np.zeros(0, dtype=np.int64)
        if not len(idx) or (by_text and st.name == "wait: accidental" and sync_k):
            continue
        # the costliest first: what a search for "forward" or a bubble cause is usually after
        top = idx[np.argsort(-(st.t1[idx] - st.t0[idx]), kind="stable")[:max(MAX_HITS - len(hits), 3)]]
        summary.append(f"{len(idx):,} × {st.name}")
        hits += [(f"{st.name} · step {int(st.info[i, 0])} · {fmt_duration(int(st.t1[i] - st.t0[i]))}",
                  {"kind": "span", "set": st.name, "i": int(i)}) for i in top]
    if not hits:
        return [], f"nothing matches '{q}' (op or phase names, bubble causes, call sites, step numbers)"
    return hits[:MAX_HITS * 2], "; ".join(summary) + (" (longest first)" if len(hits) > 1 else "")
