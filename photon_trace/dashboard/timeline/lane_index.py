"""Per lane of a span category, what a view asks of it in O(log n): which spans overlap a
range, how many, and how busy each pixel column is.

A ``SpanSet``'s spans are sorted by lane, then start. Built once when a trace is opened,
this index keeps per lane: where its spans lie in those arrays, how far its spans reach
(the latest end so far, in start order: every span before the first that reaches ``a``
ends before ``a``), its ends sorted, and running sums of its starts and ends. Then a draw
of ten million spans is a few ``searchsorted`` calls per lane and pixel column instead of
a pass (or a sort) over every span.

Busy time before ``e`` is ``sum(e - t0, t0 <= e) - sum(e - t1, t1 <= e)``: spans started
minus spans ended, exact when spans overlap. The running sums are int64 relative to the
set's first start and may wrap around (ten million spans of a long trace pass 2**63 ns);
their differences are taken in the same wrapping arithmetic, which gives the exact value
whenever the result itself fits, and it does: at most the lane's summed durations.
"""
from __future__ import annotations

import numpy as np


class LaneIndex:
    """``lane``, ``t0``, ``t1``: a set's arrays, sorted by (lane, t0). Holds views of them
    and, only for lanes whose ends are out of start order (nested or overlapping spans),
    copies: the sorted ends and the reach."""

    __slots__ = ("lanes", "bounds", "t0", "t1_sorted", "reach", "cum0", "cum1", "base")

    def __init__(self, lane: np.ndarray, t0: np.ndarray, t1: np.ndarray):
        n = len(t0)
        starts = np.flatnonzero(np.concatenate([[n > 0], lane[1:] != lane[:-1]])) if n else np.zeros(0, np.int64)
        self.lanes = lane[starts].astype(np.int64)
        self.bounds = np.append(starts, n).astype(np.int64)
        self.t0 = t0
        self.base = int(t0[0]) if n else 0
        t1_sorted, reach = t1, t1
        for s, e in zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist()):
            seg = t1[s:e]
            if np.all(seg[1:] >= seg[:-1]):
                continue
            if t1_sorted is t1:
                t1_sorted, reach = t1.copy(), t1.copy()
            t1_sorted[s:e] = np.sort(seg)
            reach[s:e] = np.maximum.accumulate(seg)
        self.t1_sorted, self.reach = t1_sorted, reach
        with np.errstate(over="ignore"):
            self.cum0 = np.concatenate([[0], np.cumsum(t0 - self.base)])
            self.cum1 = np.concatenate([[0], np.cumsum(t1_sorted - self.base)])

    def __len__(self) -> int:
        return len(self.lanes)

    def segment(self, k: int) -> tuple[int, int]:
        """Where lane ``k`` (a position in ``lanes``) lies in the set's arrays."""
        return int(self.bounds[k]), int(self.bounds[k + 1])

    def count(self, k: int, a: int, b: int) -> int:
        """Spans of lane ``k`` that overlap ``[a, b]``: started by ``b``, less those ended before ``a``."""
        s, e = self.segment(k)
        return int(np.searchsorted(self.t0[s:e], b, side="right") - np.searchsorted(self.t1_sorted[s:e], a))

    def count_all(self, a: int, b: int) -> int:
        return sum(self.count(k, a, b) for k in range(len(self)))

    def overlapping(self, k: int, a: int, b: int, t1: np.ndarray) -> np.ndarray:
        """Positions (in the set's order) of lane ``k``'s spans that overlap ``[a, b]``."""
        s, e = self.segment(k)
        lo = s + int(np.searchsorted(self.reach[s:e], a))
        hi = s + int(np.searchsorted(self.t0[s:e], b, side="right"))
        if hi <= lo:
            return np.zeros(0, dtype=np.int64)
        return lo + np.flatnonzero(t1[lo:hi] >= a)

    def overlapping_all(self, a: int, b: int, t1: np.ndarray) -> np.ndarray:
        """Every lane's spans that overlap ``[a, b]``, in the set's order."""
        parts = [self.overlapping(k, a, b, t1) for k in range(len(self))]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def busy(self, k: int, edges: np.ndarray) -> np.ndarray:
        """Busy ns of lane ``k``'s spans in each interval between ``edges`` (overlaps summed)."""
        s, e = self.segment(k)
        # integer times: t <= e exactly when t <= floor(e); searching int64 for int64 copies nothing
        at = np.floor(edges).astype(np.int64)
        k0 = np.searchsorted(self.t0[s:e], at, side="right")
        k1 = np.searchsorted(self.t1_sorted[s:e], at, side="right")
        with np.errstate(over="ignore"):
            summed = (self.cum0[s + k0] - self.cum0[s]) - (self.cum1[s + k1] - self.cum1[s])
        before = (k0 - k1) * (np.asarray(edges, dtype=np.float64) - self.base) - summed
        return np.diff(before)

    def nbytes(self) -> int:
        """What the index adds to the set's own arrays."""
        copied = self.reach is not self.t1_sorted    # both are the set's t1 unless a lane needed sorting
        return self.cum0.nbytes + self.cum1.nbytes + (self.t1_sorted.nbytes + self.reach.nbytes if copied else 0)
