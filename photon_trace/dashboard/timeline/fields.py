"""A trace's record fields as arrays for the timeline, from a list of records or ``Columns``.

The timeline is built from arrays only (``data.py``): numbers as int64, text as int32 codes
into the names in order of first appearance (lanes and categories are laid out in that
order, so both forms of one trace draw alike). From ``Columns`` nothing is iterated per
record; from a list each field is one C-level pass. ``Labels`` keeps per-span text (an
imported op's own name, a wait's reason) as codes too: ten million spans share a few
thousand names, and a string is built only for a span that is shown.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter

import numpy as np

from photon_trace.telemetry.trace.columns import Columns, column


def text_codes(records: Sequence, name: str) -> tuple[np.ndarray, list[str]]:
    """Field ``name`` as (int32 codes, the distinct values in order of first appearance)."""
    n = len(records)
    if not n:
        return np.zeros(0, dtype=np.int32), []
    if isinstance(records, Columns):
        codes, table = records.arrays[name], records.tables[name]
        first = np.full(len(table), n, dtype=np.int64)
        np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
        used = np.flatnonzero(first < n)
        used = used[np.argsort(first[used], kind="stable")]
        lut = np.full(len(table), -1, dtype=np.int32)
        lut[used] = np.arange(len(used), dtype=np.int32)
        return lut[codes], [str(table[c]) for c in used.tolist()]
    get = itemgetter(type(records[0])._fields.index(name))
    names = list(dict.fromkeys(map(get, records)))
    lut = {v: i for i, v in enumerate(names)}
    return np.fromiter(map(lut.__getitem__, map(get, records)), np.int32, n), [str(v) for v in names]


def numbers(records: Sequence, name: str) -> np.ndarray:
    """Field ``name`` as int64 (flags as bool), empty when there are no records."""
    return column(records, name) if len(records) else np.zeros(0, dtype=np.int64)


class Labels(Sequence):
    """Per-span strings as codes into ``table``: indexing gives the string, ``take`` a subset."""

    __slots__ = ("codes", "table")

    def __init__(self, codes: np.ndarray, table: list[str]):
        self.codes, self.table = np.asarray(codes, dtype=np.int32), table

    @classmethod
    def of(cls, strings: Sequence[str]) -> Labels:
        """Labels of plain strings (each distinct one kept once)."""
        index: dict[str, int] = {}
        codes = np.fromiter((index.setdefault(t, len(index)) for t in strings), dtype=np.int32, count=len(strings))
        return cls(codes, list(index))

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Labels(self.codes[i], self.table)
        return self.table[int(self.codes[i])]

    def __iter__(self) -> Iterator[str]:
        table = self.table
        return (table[c] for c in self.codes.tolist())

    def take(self, index: np.ndarray) -> Labels:
        return Labels(self.codes[index], self.table)

    def matching(self, pred) -> np.ndarray:
        """A bool per span: ``pred`` of its string, asked once per distinct string."""
        hit = np.fromiter((bool(pred(t)) for t in self.table), dtype=bool, count=len(self.table))
        return hit[self.codes] if len(self.table) else np.zeros(len(self.codes), dtype=bool)


def pair_labels(a: tuple[np.ndarray, list[str]], b: tuple[np.ndarray, list[str]], fmt: str) -> Labels:
    """Labels of two coded fields together (``fmt`` with ``{a}`` and ``{b}``): one string per
    distinct pair present, not per span."""
    ca, cb = a[0].astype(np.int64), b[0].astype(np.int64)
    pair = ca * max(len(b[1]), 1) + cb
    present, codes = np.unique(pair, return_inverse=True)
    nb = max(len(b[1]), 1)
    table = [fmt.format(a=a[1][p // nb], b=b[1][p % nb]) for p in present.tolist()]
    return Labels(codes.astype(np.int32), table)
