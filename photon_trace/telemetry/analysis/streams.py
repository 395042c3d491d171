"""Every stream on its own: busy, idle, the causes of its idle, and what other streams covered.

The report analyses one stream (the primary one); a multi-stream program (compute plus
NCCL, copy or side streams) has idle on each. ``stream_stats`` gives one row per stream,
over that stream's own span inside the window (its first op's start to its last op's
end, as HTA measures a stream's idle), with its idle split by cause as ``bubbles``
classifies it on that stream. ``covered_ns`` is the part of the idle during which some
other stream was busy: a bubble there is not an idle *device*. ``with_cover`` marks each
bubble of the primary stream with that part and the stream that covered most of it.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from typing import NamedTuple

from photon_trace.telemetry.analysis.bubbles import (
    DISPATCH, MIN_BUBBLE_NS, Bubble, busy_intervals, classify, device_gaps)
from photon_trace.telemetry.analysis.lanes import on_stream, streams
from photon_trace.telemetry.records import Trace

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
    causes: dict          # cause (or SHORT_GAPS) -> idle ns; sums to idle_ns

    @property
    def idle_fraction(self) -> float:
        return self.idle_ns / self.span_ns if self.span_ns else 0.0


def _merge(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(runs):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


class _Busy:
    """Disjoint busy runs with prefix sums: how much of [a, b) they cover, in O(log n)."""

    def __init__(self, runs: list[tuple[int, int]]):
        self.runs = _merge(runs)
        self.starts = [a for a, _ in self.runs]
        self.before = [0]
        for a, b in self.runs:
            self.before.append(self.before[-1] + b - a)

    def _upto(self, x: int) -> int:
        i = bisect_right(self.starts, x)
        if i == 0:
            return 0
        a, b = self.runs[i - 1]
        return self.before[i - 1] + min(x, b) - a

    def within(self, a: int, b: int) -> int:
        return self._upto(b) - self._upto(a) if b > a else 0


def stream_stats(trace: Trace, window: tuple[int, int], *, min_gap_ns: int = MIN_BUBBLE_NS,
                 slack_ns: int | None = None) -> list[StreamStats]:
    """One row per stream with an op in ``window`` (primary stream first)."""
    w0, w1 = window
    busy_of = {s: busy_intervals(on_stream(trace, s), window) for s in streams(trace)}
    rows = []
    for s, runs in busy_of.items():
        if not runs:
            continue
        view = on_stream(trace, s)
        span = (runs[0][0], runs[-1][1])
        gaps = device_gaps(view, span)
        causes: Counter = Counter()
        for b in classify(view, gaps, min_gap_ns=min_gap_ns, slack_ns=slack_ns):
            causes[b.cause] += b.duration_ns
        busy = sum(b - a for a, b in runs)
        idle = span[1] - span[0] - busy
        short = idle - sum(causes.values())
        if short:
            causes[SHORT_GAPS] += short
        others = _Busy([r for o, rs in busy_of.items() if o != s for r in rs])
        host = sum(min(max(g.next.enqueued, g.t0), g.t1) - g.t0 for g in gaps)
        covered = sum(others.within(g.t0, g.t1) for g in gaps)
        n = sum(1 for d in trace.device_spans if d.stream == s and d.t0 < w1 and d.t1 > w0)
        rows.append(StreamStats(s, n, span[1] - span[0], busy, idle, host, covered, dict(causes)))
    return rows


def with_cover(trace: Trace, bubbles: list[Bubble], stream: str, window: tuple[int, int]) -> list[Bubble]:
    """``bubbles`` (of ``stream``) with ``covered_ns``/``covered_by`` set from the other streams' ops."""
    runs = {s: busy_intervals(on_stream(trace, s), window) for s in streams(trace) if s != stream}
    if not any(runs.values()):
        return bubbles
    each = {s: _Busy(r) for s, r in runs.items()}
    every = _Busy([r for rs in runs.values() for r in rs])
    out = []
    for b in bubbles:
        union = every.within(b.t0, b.t1)
        top = max(each, key=lambda s: each[s].within(b.t0, b.t1))
        out.append(b._replace(covered_ns=union, covered_by=top if union else ""))
    return out


__all__ = ["StreamStats", "stream_stats", "with_cover", "SHORT_GAPS", "DISPATCH"]
