"""A report's bubbles as columns: a ``Sequence`` of ``Bubble`` without a Python object each.

Our own ten-million-span trace has four million bubbles; as ``Bubble`` tuples (eight fields,
their ints) they took ~200 bytes each, 0.8 GB held by the report, and ``streams.with_cover``
made every one again. ``Bubbles`` keeps them as arrays (~45 bytes a bubble): the times, the
step, a code per (cause, detail) row and per covering stream. Indexing and iterating build the
``Bubble`` tuples on demand, equal to the ones the list held, so code written for the list
(the command line, the dashboard, ``to_dict``) reads it unchanged; the report's own sums (idle
per row, the syncs' idle, the host rows) are array sums per code (``per_row``).
"""
from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.causes import Cause

_BLOCK = 1 << 14    # bubbles built per block while iterating


class Bubble(NamedTuple):
    """A stretch of a gap (clipped to the window) with one cause."""
    t0: int
    t1: int
    duration_ns: int
    step: int          # the step of the op after the gap
    cause: Cause
    detail: str        # host phase, call site, copy op, or what the host was outside of
    covered_ns: int = 0    # of it, time another stream was busy (``streams.with_cover``)
    covered_by: str = ""   # the stream that covered most of it


class Bubbles(Sequence):
    """Bubbles in time order: ``t0``, ``t1``, ``step``, ``covered_ns`` (int64), ``row`` (codes into
    ``rows``, each a (cause, detail)), ``by`` (codes into ``streams``; -1: ``covered_by`` "")."""

    __slots__ = ("t0", "t1", "step", "row", "rows", "covered_ns", "by", "streams")

    def __init__(self, t0: np.ndarray, t1: np.ndarray, step: np.ndarray, row: np.ndarray,
                 rows: list[tuple[Cause, str]], covered_ns: np.ndarray | None = None,
                 by: np.ndarray | None = None, streams: list[str] | None = None):
        n = len(t0)
        self.t0, self.t1, self.step, self.row, self.rows = t0, t1, step, row, rows
        self.covered_ns = np.zeros(n, np.int64) if covered_ns is None else covered_ns
        self.by = np.full(n, -1, np.int32) if by is None else by
        self.streams = streams or []

    @classmethod
    def of(cls, bubbles: Iterable) -> Bubbles:
        """From ``Bubble`` records (or anything with their fields)."""
        out = BubbleColumns()
        for b in bubbles:
            out.add(b.t0, b.t1, b.step, b.cause, b.detail)
        return out.done()

    def with_cover(self, covered_ns: np.ndarray, by: np.ndarray, streams: list[str]) -> Bubbles:
        return Bubbles(self.t0, self.t1, self.step, self.row, self.rows, covered_ns.astype(np.int64),
                       np.where(covered_ns > 0, by, -1).astype(np.int32), streams)

    # -- sums ---------------------------------------------------------------------------------
    def total_ns(self) -> int:
        return int((self.t1 - self.t0).sum())

    def per_row(self) -> dict[tuple[Cause, str], int]:
        """Idle per (cause, detail) present, exact integer sums (a few rows: one mask each)."""
        duration = self.t1 - self.t0
        present = np.flatnonzero(np.bincount(self.row, minlength=len(self.rows))) if len(self.row) else []
        return {self.rows[c]: int(duration[self.row == c].sum()) for c in np.asarray(present).tolist()}

    # -- the Sequence -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.t0)

    def _take(self, index: Any) -> Bubbles:
        return Bubbles(self.t0[index], self.t1[index], self.step[index], self.row[index], self.rows,
                       self.covered_ns[index], self.by[index], self.streams)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self._take(i)
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError("bubble index out of range")
        return next(iter(self._take(slice(j, j + 1))))

    def __iter__(self) -> Iterator:
        rows, names = self.rows, self.streams + [""]
        for lo in range(0, len(self), _BLOCK):
            hi = lo + _BLOCK
            t0, t1 = self.t0[lo:hi].tolist(), self.t1[lo:hi].tolist()
            yield from (Bubble(a, b, b - a, s, *rows[r], c, names[k]) for a, b, s, r, c, k in
                        zip(t0, t1, self.step[lo:hi].tolist(), self.row[lo:hi].tolist(),
                            self.covered_ns[lo:hi].tolist(), self.by[lo:hi].tolist()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Bubbles, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]   # equal to a list, so not hashable

    def __repr__(self) -> str:
        return f"Bubbles({len(self):,} bubbles)"


class BubbleColumns:
    """Bubbles appended one at a time (as the gaps are split), made ``Bubbles`` by ``done``."""

    __slots__ = ("t0", "t1", "step", "row", "_codes")

    def __init__(self) -> None:
        self.t0, self.t1, self.step, self.row = array("q"), array("q"), array("q"), array("i")
        self._codes: dict[tuple[Cause, str], int] = {}

    def add(self, t0: int, t1: int, step: int, cause: Cause, detail: str) -> None:
        key = (cause, detail)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self._codes)
        self.t0.append(t0)
        self.t1.append(t1)
        self.step.append(step)
        self.row.append(code)

    def add_parts(self, parts: Iterable, lo: int, hi: int, step: int) -> None:
        """A gap's parts (``t0``, ``t1``, ``cause``, ``detail``, in time order) clipped to [lo, hi), the
        empty ones left out: ``add`` of each, with its lookups made once a gap, not once a part."""
        codes, t0s, t1s, steps, rows = self._codes, self.t0, self.t1, self.step, self.row
        for t0, t1, cause, detail in parts:
            a = t0 if t0 > lo else lo
            b = t1 if t1 < hi else hi
            if a < b:
                key = (cause, detail)
                code = codes.get(key)
                if code is None:
                    code = codes[key] = len(codes)
                t0s.append(a)
                t1s.append(b)
                steps.append(step)
                rows.append(code)

    def done(self) -> Bubbles:
        arr = lambda a, t: np.frombuffer(a, dtype=t).copy() if len(a) else np.empty(0, t)   # noqa: E731
        return Bubbles(arr(self.t0, np.int64), arr(self.t1, np.int64), arr(self.step, np.int64),
                       arr(self.row, np.int32), list(self._codes))
