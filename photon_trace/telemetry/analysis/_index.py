"""A small interval index: "which spans overlap [a, b)?" in O(log n + k).

Spans here are anything with ``t0``/``t1`` (host spans, waits, device spans).
They may overlap each other (several threads, nested phases), so a plain
bisect on ``t0`` is not enough; we bound the backwards scan by the longest
span instead, which is short for every kind of record a trace holds.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Generic, Iterable, Iterator, Protocol, TypeVar


class _Span(Protocol):
    @property
    def t0(self) -> int: ...
    @property
    def t1(self) -> int: ...


S = TypeVar("S", bound=_Span)


class IntervalIndex(Generic[S]):
    __slots__ = ("items", "_starts", "_longest")

    def __init__(self, spans: Iterable[S]):
        self.items: list[S] = sorted(spans, key=lambda s: (s.t0, s.t1))
        self._starts = [s.t0 for s in self.items]
        self._longest = max((s.t1 - s.t0 for s in self.items), default=0)

    def overlapping(self, a: int, b: int) -> Iterator[S]:
        """Spans with ``t0 < b`` and ``t1 > a`` (a zero-length span at ``a`` does not count)."""
        lo = bisect_left(self._starts, a - self._longest)
        hi = bisect_left(self._starts, b)
        for s in self.items[lo:hi]:
            if s.t1 > a:
                yield s

    def overlapping_list(self, a: int, b: int) -> list[S]:
        """``overlapping`` as a list: no generator for a caller that asks once a gap."""
        lo = bisect_left(self._starts, a - self._longest)
        return [s for s in self.items[lo:bisect_left(self._starts, b)] if s.t1 > a]

    def __len__(self) -> int:
        return len(self.items)


def overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    """Length of the intersection of [a0, a1) and [b0, b1); 0 when disjoint."""
    return max(0, min(a1, b1) - max(a0, b0))
