"""Every stream on its own: busy, idle, the causes of its idle, and what other streams covered.

The report analyses one stream (the primary one); a multi-stream program (compute plus
NCCL, copy or side streams) has idle on each. ``stream_stats`` gives one row per stream,
over that stream's own span inside the window (its first op's start to its last op's
end, as HTA measures a stream's idle, less the time the engine had nothing to run:
``no_work``), with its idle split by cause as ``bubbles``
classifies it on that stream. ``covered_ns`` is the part of the idle during which some
other stream was busy: a bubble there is not an idle *device*. ``with_cover`` marks each
bubble of the primary stream with that part and the stream that covered most of it.
"""
from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.bubble_table import Bubbles
from photon_trace.telemetry.analysis.bubbles import MIN_BUBBLE_NS, Bubble, Gap, busy_intervals, device_gaps, split_gaps
from photon_trace.telemetry.analysis.gaps import Gaps
from photon_trace.telemetry.analysis.no_work import NoWork
from photon_trace.telemetry.analysis.runs import Runs, first_of_each, per_group
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.lanes import on_stream, streams
from photon_trace.telemetry.trace.records import Trace

SHORT_GAPS = "short_gaps"
"""Idle in gaps under the bubble threshold (the device's own launch gaps, HTA's kernel wait)."""


class StreamStats(NamedTuple):
    stream: str
    ops: int
    span_ns: int          # first op start to last op end, inside the window
    busy_ns: int
    idle_ns: int
    host_idle_ns: int     # idle before the next op was enqueued (the host was late: HTA's host wait)
    covered_ns: int       # idle while another stream was busy
    causes: dict          # cause (or SHORT_GAPS) -> idle ns; sums to idle_ns (empty: not split)

    @property
    def idle_fraction(self) -> float:
        return self.idle_ns / self.span_ns if self.span_ns else 0.0


def stream_stats(trace: Trace, window: tuple[int, int], *, min_gap_ns: int = MIN_BUBBLE_NS,
                 slack_ns: int | None = None, known: dict[str, tuple[list, list[Gap], list[Bubble]]] | None = None,
                 causes: bool = True) -> list[StreamStats]:
    """One row per stream with an op in ``window`` (primary stream first).

    ``known``: streams already analysed over ``window`` (busy runs, gaps, bubbles), not redone.
    ``causes=False``: the other streams' idle is not split by cause (their ``causes`` is empty)."""
    w0, w1 = window
    known = known or {}
    no_work = NoWork(trace)
    busy_of = {s: known[s][0] if s in known else busy_intervals(on_stream(trace, s), window) for s in streams(trace)}
    counts = _ops_in(trace, window)
    rows = []
    for s, runs in busy_of.items():
        if not len(runs):
            continue
        span = (runs[0][0], runs[-1][1])
        split: Counter = Counter()
        if s in known:
            gaps = known[s][1]
            gaps = gaps.take((span[0] <= gaps.t0) & (gaps.t1 <= span[1])) if isinstance(gaps, Gaps) else \
                [g for g in gaps if span[0] <= g.t0 and g.t1 <= span[1]]
            _add_bubbles(split, known[s][2], span)
        else:
            view = on_stream(trace, s)
            gaps = device_gaps(view, span)
            if causes:      # the bubbles' time per cause, without making each bubble (``bubbles_of``)
                for g, parts in split_gaps(view, gaps, min_gap_ns=min_gap_ns, slack_ns=slack_ns):
                    for p in parts.parts:
                        a, b = max(p.t0, g.t0), min(p.t1, g.t1)
                        if a < b:
                            split[p.cause] += b - a
        busy = runs.total() if isinstance(runs, Runs) else sum(b - a for a, b in runs)
        none = no_work.overlap_ns(*span)    # the engine had nothing to run: no one's idle
        gaps = no_work.cut(gaps)
        idle = span[1] - span[0] - none - busy
        short = idle - sum(split.values())
        if short and (causes or s in known):
            split[SHORT_GAPS] += short
        others = Runs.merged(*[_runs(rs) for o, rs in busy_of.items() if o != s])
        if isinstance(gaps, Gaps):
            host, covered = gaps.host_late_ns(), int(others.within(gaps.t0, gaps.t1).sum())
        else:
            host = sum(min(max(g.next.enqueued, g.t0), g.t1) - g.t0 for g in gaps)
            covered = int(others.within([g.t0 for g in gaps], [g.t1 for g in gaps]).sum())
        rows.append(StreamStats(s, counts.get(s, 0), span[1] - span[0] - none, busy, idle, host, covered, dict(split)))
    return rows


def _add_bubbles(split: Counter, bubbles: list[Bubble] | Bubbles, span: tuple[int, int]) -> None:
    """Each bubble's time inside ``span`` into ``split`` per cause (a cause first met with none
    inside is still keyed): columns summed per row, the causes in the order of their first bubble."""
    if not isinstance(bubbles, Bubbles):
        for b in bubbles:
            split[b.cause] += max(0, min(b.t1, span[1]) - max(b.t0, span[0]))
        return
    if not len(bubbles):
        return
    inside = np.maximum(0, np.minimum(bubbles.t1, span[1]) - np.maximum(bubbles.t0, span[0]))
    rows, ns = per_group(bubbles.row, inside)
    first = first_of_each(bubbles.row)      # by row, as ``rows``
    for _, row, n in sorted(zip(first.tolist(), rows.tolist(), ns.tolist())):
        split[bubbles.rows[row][0]] += n


def _runs(runs: Runs | list[tuple[int, int]]) -> Runs:
    if isinstance(runs, Runs):
        return runs
    return Runs(np.array([a for a, _ in runs], dtype=np.int64), np.array([b for _, b in runs], dtype=np.int64))


def _ops_in(trace: Trace, window: tuple[int, int]) -> dict[str, int]:
    """Per stream, its ops that overlap ``window``."""
    w0, w1 = window
    stream, table = codes(trace.device_spans, "stream")
    inside = (column(trace.device_spans, "t0") < w1) & (column(trace.device_spans, "t1") > w0)
    n = np.bincount(np.asarray(stream)[inside], minlength=len(table)) if len(table) else []
    return {name: int(k) for name, k in zip(table, n) if k}


def with_cover(trace: Trace, bubbles: list[Bubble] | Bubbles, stream: str,
               window: tuple[int, int]) -> list[Bubble] | Bubbles:
    """``bubbles`` (of ``stream``; a list or ``Bubbles``) with ``covered_ns``/``covered_by`` set from
    the other streams' ops."""
    runs = {s: busy_intervals(on_stream(trace, s), window) for s in streams(trace) if s != stream}
    if not any(len(r) for r in runs.values()):
        return bubbles
    names = list(runs)
    if isinstance(bubbles, Bubbles):    # columns in, columns out
        if not len(bubbles):
            return bubbles
        each = np.stack([runs[s].within(bubbles.t0, bubbles.t1) for s in names])
        return bubbles.with_cover(Runs.merged(*runs.values()).within(bubbles.t0, bubbles.t1), each.argmax(axis=0), names)
    a, b = [x.t0 for x in bubbles], [x.t1 for x in bubbles]
    each = np.stack([runs[s].within(a, b) for s in names]) if bubbles else np.zeros((len(names), 0))
    union = Runs.merged(*runs.values()).within(a, b)
    top = each.argmax(axis=0) if len(bubbles) else []
    return [x._replace(covered_ns=int(u), covered_by=names[t] if u else "")
            for x, u, t in zip(bubbles, union, top)]


__all__ = ["StreamStats", "stream_stats", "with_cover", "SHORT_GAPS"]
