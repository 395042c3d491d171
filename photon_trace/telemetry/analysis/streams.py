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

import heapq
from collections import Counter
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.bubbles import MIN_BUBBLE_NS, Bubble, Gap, busy_intervals, classify, device_gaps
from photon_trace.telemetry.analysis.no_work import NoWork
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


def _merge(*streams: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of streams' busy runs (each sorted and disjoint already)."""
    if len(streams) == 1:
        return streams[0]
    out: list[tuple[int, int]] = []
    for a, b in heapq.merge(*streams):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


class _Busy:
    """Disjoint busy runs with prefix sums: how much of each [a, b) they cover (vectorised)."""

    def __init__(self, *streams: list[tuple[int, int]]):
        merged = _merge(*streams)
        self.starts = np.array([x for x, _ in merged], dtype=np.int64)
        self.ends = np.array([y for _, y in merged], dtype=np.int64)
        self.before = np.concatenate([[0], np.cumsum(self.ends - self.starts)]).astype(np.int64)

    def _upto(self, x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.starts, x, side="right")
        j = np.maximum(i - 1, 0)
        part = np.where(i > 0, np.minimum(x, self.ends[j]) - self.starts[j], 0) if len(self.starts) else 0
        return self.before[j] * (i > 0) + part

    def within(self, a: list[int], b: list[int]) -> np.ndarray:
        """Busy ns inside each [a[k], b[k])."""
        if not len(self.starts) or not len(a):
            return np.zeros(len(a), dtype=np.int64)
        a_, b_ = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        return np.where(b_ > a_, self._upto(b_) - self._upto(a_), 0)


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
    counts = Counter(d.stream for d in trace.device_spans if d.t0 < w1 and d.t1 > w0)
    rows = []
    for s, runs in busy_of.items():
        if not runs:
            continue
        span = (runs[0][0], runs[-1][1])
        split: Counter = Counter()
        if s in known:
            gaps = [g for g in known[s][1] if span[0] <= g.t0 and g.t1 <= span[1]]
            for b in known[s][2]:
                split[b.cause] += max(0, min(b.t1, span[1]) - max(b.t0, span[0]))
        else:
            view = on_stream(trace, s)
            gaps = device_gaps(view, span)
            for b in classify(view, gaps, min_gap_ns=min_gap_ns, slack_ns=slack_ns) if causes else ():
                split[b.cause] += b.duration_ns
        busy = sum(b - a for a, b in runs)
        none = no_work.overlap_ns(*span)    # the engine had nothing to run: no one's idle
        gaps = no_work.cut(gaps)
        idle = span[1] - span[0] - none - busy
        short = idle - sum(split.values())
        if short and (causes or s in known):
            split[SHORT_GAPS] += short
        others = _Busy(*[rs for o, rs in busy_of.items() if o != s])
        host = sum(min(max(g.next.enqueued, g.t0), g.t1) - g.t0 for g in gaps)
        covered = int(others.within([g.t0 for g in gaps], [g.t1 for g in gaps]).sum())
        rows.append(StreamStats(s, counts[s], span[1] - span[0] - none, busy, idle, host, covered, dict(split)))
    return rows


def with_cover(trace: Trace, bubbles: list[Bubble], stream: str, window: tuple[int, int]) -> list[Bubble]:
    """``bubbles`` (of ``stream``) with ``covered_ns``/``covered_by`` set from the other streams' ops."""
    runs = {s: busy_intervals(on_stream(trace, s), window) for s in streams(trace) if s != stream}
    if not any(runs.values()):
        return bubbles
    names = list(runs)
    a, b = [x.t0 for x in bubbles], [x.t1 for x in bubbles]
    each = np.stack([_Busy(runs[s]).within(a, b) for s in names]) if bubbles else np.zeros((len(names), 0))
    union = _Busy(*runs.values()).within(a, b)
    top = each.argmax(axis=0) if len(bubbles) else []
    return [x._replace(covered_ns=int(u), covered_by=names[t] if u else "")
            for x, u, t in zip(bubbles, union, top)]


__all__ = ["StreamStats", "stream_stats", "with_cover", "SHORT_GAPS"]
