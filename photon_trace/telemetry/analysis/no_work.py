"""No work: the time the engine had nothing to run, which is no bubble.

A server with little traffic idles its device between requests: no request was running
or waiting, and the engine thread slept until one came (``Engine.wait_for_work`` records
each such wait as a ``no_work`` host span). That idle is no host fault, and no fix of
host code or the device would shorten it: counted as a bubble it made a paced client's
trace read "host-bound outside phases" and fail the gate. So the device's idle inside a
``no_work`` span is *no work*, reported apart from bubbles:

* ``attribution`` cuts it out of every gap it falls in: a gap partly inside no work keeps
  only its parts outside as bubbles, attributed as any other (the host's work before the
  engine went to sleep, and after the request came, is still host time);
* ``report`` keeps it out of the idle fraction (idle while the engine had work) and says
  it as ``no_work_ns`` beside it; the predicted speedups are over the time with work;
* ``check`` gates the idle fraction and states both figures.

Only our engine's traces have such spans: an imported trace (``header["source"]``) names
its own spans, and one called ``no_work`` there is just a span.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple, TypeVar

import numpy as np

from photon_trace.telemetry.analysis.gaps import Gaps
from photon_trace.telemetry.analysis.runs import Runs
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.tracer import NO_WORK

__all__ = ["NO_WORK", "NoWork"]


def _no_work_spans(host_spans) -> list[tuple[int, int]]:
    phase, table = codes(host_spans, "phase")
    if NO_WORK not in table:
        return []
    mine = np.asarray(phase) == table.index(NO_WORK)
    return list(zip(column(host_spans, "t0")[mine].tolist(), column(host_spans, "t1")[mine].tolist()))


class _Span(NamedTuple):
    t0: int
    t1: int


P = TypeVar("P", bound=tuple)


class NoWork:
    """The trace's no-work spans as disjoint intervals in time order (any thread's)."""

    __slots__ = ("spans", "_starts")

    def __init__(self, trace: Trace | None = None, spans: list[tuple[int, int]] | None = None) -> None:
        if spans is None:
            ours = trace is not None and not trace.header.get("source")
            spans = _no_work_spans(trace.host_spans) if ours else []
        merged: list[_Span] = []
        for a, b in sorted(s for s in spans if s[1] > s[0]):
            if merged and a <= merged[-1].t1:
                if b > merged[-1].t1:
                    merged[-1] = _Span(merged[-1].t0, b)
            else:
                merged.append(_Span(a, b))
        self.spans = merged
        self._starts = [s.t0 for s in merged]

    def __bool__(self) -> bool:
        return bool(self.spans)

    def _near(self, a: int, b: int) -> list[_Span]:
        """The spans that overlap [a, b)."""
        i = max(0, bisect_right(self._starts, a) - 1)
        out = []
        for s in self.spans[i:]:
            if s.t0 >= b:
                break
            if s.t1 > a:
                out.append(s)
        return out

    def overlap_ns(self, a: int, b: int) -> int:
        """How much of [a, b) lies in no work."""
        return sum(min(b, s.t1) - max(a, s.t0) for s in self._near(a, b))

    def outside(self, a: int, b: int) -> list[tuple[int, int]]:
        """[a, b) less the no-work spans, as disjoint pieces in order."""
        out, start = [], a
        for s in self._near(a, b):
            if s.t0 > start:
                out.append((start, s.t0))
            start = max(start, s.t1)
        if start < b:
            out.append((start, b))
        return out

    def overlap_total(self, a: np.ndarray, b: np.ndarray) -> int:
        """How much of the disjoint intervals [a[k], b[k]) lies in no work, all together."""
        if not self.spans:
            return 0
        return int(self._runs().within(a, b).sum())

    def _runs(self) -> Runs:
        return Runs(np.array(self._starts, dtype=np.int64), np.array([s.t1 for s in self.spans], dtype=np.int64))

    def cut(self, parts: list[P] | Gaps) -> list[P] | Gaps:
        """``parts`` (NamedTuples with ``t0``, ``t1``, in time order, or ``Gaps``) with the stretches
        in no work taken out: a part across a span's edge keeps what lies outside it."""
        if not self.spans:
            return parts
        if isinstance(parts, Gaps):
            return self._cut_gaps(parts)
        out: list[P] = []
        for p in parts:
            out += [p._replace(t0=a, t1=b) for a, b in self.outside(p.t0, p.t1)]
        return out

    def _cut_gaps(self, gaps: Gaps) -> Gaps:
        """``cut`` of gaps held as arrays: only the gaps that reach into no work are cut, one by one."""
        inside = self._runs().within(gaps.t0, gaps.t1)
        hit = np.flatnonzero(inside > 0)
        if not len(hit):
            return gaps
        index = [np.flatnonzero(inside == 0)]
        pieces = [(k, a, b) for k in hit.tolist() for a, b in self.outside(int(gaps.t0[k]), int(gaps.t1[k]))]
        index.append(np.array([k for k, _, _ in pieces], dtype=np.int64))
        t0 = np.concatenate([gaps.t0[index[0]], np.array([a for _, a, _ in pieces], dtype=np.int64)])
        t1 = np.concatenate([gaps.t1[index[0]], np.array([b for _, _, b in pieces], dtype=np.int64)])
        k = np.concatenate(index)
        order = np.lexsort((t0, k))     # each gap's pieces in place, in time order
        k, t0, t1 = k[order], t0[order], t1[order]
        return Gaps(gaps.ops, t0, t1, gaps.full_ns[k], gaps.prev[k], gaps.next[k])
