"""Disjoint time intervals as two arrays: busy runs, no-work spans, gaps; unions and coverage.

A stream's busy time is the union of its ops, and much of the analysis asks "how much of
[a, b) do these runs cover?" for many intervals at once (each gap, each bubble, each step).
Held as sorted ``starts``/``ends`` arrays with prefix sums, that is two ``searchsorted``
calls for all the questions together, instead of a Python loop per interval: at ten million
events the loop, not the arithmetic, was the cost. ``Runs`` is still a ``Sequence`` of
``(t0, t1)`` tuples, equal to the list the code before it returned.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

_I64 = np.int64


def first_of_each(key: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct value of ``key``, by value."""
    order = np.argsort(key, kind="stable")
    k = key[order]
    return order[np.append(True, k[1:] != k[:-1])] if len(k) else order


def per_group(group: np.ndarray, value: np.ndarray, how: np.ufunc = np.add) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct groups, sorted; ``how`` of ``value`` over each): integer sums stay exact."""
    if not len(group):
        return group, value
    order = np.argsort(group, kind="stable")
    g = group[order]
    start = np.flatnonzero(np.append(True, g[1:] != g[:-1]))
    return g[start], how.reduceat(value[order], start)


def union(t0: np.ndarray, t1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [t0[k], t1[k]) given in start order (empty ones included: a run
    may touch the next, ``a <= end``, and then they merge), as disjoint (starts, ends)."""
    t0, t1 = np.asarray(t0, dtype=_I64), np.asarray(t1, dtype=_I64)
    if not len(t0):
        return np.empty(0, _I64), np.empty(0, _I64)
    reach = np.maximum.accumulate(t1)
    # a new run begins where the start lies beyond everything before it has reached
    new = np.empty(len(t0), dtype=bool)
    new[0] = True
    new[1:] = t0[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(t0)) - 1
    return t0[first], reach[last]


class Runs(Sequence):
    """Disjoint, sorted intervals ``[starts[k], ends[k])`` with prefix sums of their lengths."""

    __slots__ = ("starts", "ends", "_before")

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.starts = np.asarray(starts, dtype=_I64)
        self.ends = np.asarray(ends, dtype=_I64)
        self._before = np.concatenate([[0], np.cumsum(self.ends - self.starts)]).astype(_I64)

    @classmethod
    def of(cls, t0: np.ndarray, t1: np.ndarray) -> Runs:
        """The union of intervals in start order (``union``)."""
        return cls(*union(t0, t1))

    @classmethod
    def merged(cls, *runs: Runs) -> Runs:
        """The union of several ``Runs`` (each disjoint and sorted already)."""
        if len(runs) == 1:
            return runs[0]
        s = np.concatenate([r.starts for r in runs]) if runs else np.empty(0, _I64)
        e = np.concatenate([r.ends for r in runs]) if runs else np.empty(0, _I64)
        order = np.lexsort((e, s))
        return cls.of(s[order], e[order])

    def total(self) -> int:
        return int(self._before[-1])

    def _upto(self, x: np.ndarray) -> np.ndarray:
        """Covered time before each x."""
        i = np.searchsorted(self.starts, x, side="right")
        j = np.maximum(i - 1, 0)
        part = np.where(i > 0, np.minimum(x, self.ends[j]) - self.starts[j], 0)
        return np.where(i > 0, self._before[j] + part, 0)

    def within(self, a: Any, b: Any) -> np.ndarray:
        """Covered ns inside each [a[k], b[k]) (0 where b <= a)."""
        a_, b_ = np.asarray(a, dtype=_I64), np.asarray(b, dtype=_I64)
        if not len(self.starts) or not a_.size:
            return np.zeros(a_.shape, dtype=_I64)
        return np.where(b_ > a_, self._upto(b_) - self._upto(a_), 0)

    # -- the Sequence of (t0, t1) -----------------------------------------------------
    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [(int(a), int(b)) for a, b in zip(self.starts[i], self.ends[i])]
        return (int(self.starts[i]), int(self.ends[i]))

    def __iter__(self):
        return zip(self.starts.tolist(), self.ends.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Runs, list, tuple)):
            return len(self) == len(other) and all(x == tuple(y) for x, y in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Runs({list(self)[:4]}{'...' if len(self) > 4 else ''}, {len(self)} runs)"
