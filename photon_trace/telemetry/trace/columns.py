"""Records held as columns: one numpy array per field instead of one Python object per record.

A profile of ten million events as ``HostSpan``/``DeviceSpan`` tuples costs ~200 bytes a
record and a Python loop per pass; as columns it is ~40 bytes a record and the analysis's
hot passes (gap splitting, per-stream and per-step sums) run as array operations. ``Columns``
is still a ``Sequence`` of the record type, so code written for lists reads it unchanged:
indexing and iterating build the tuples on demand, a block at a time. Text fields (phase,
thread, op, stream, site) are codes into a table of the distinct strings.

``column(records, name)`` gives one field as an array for either form: zero-copy from
``Columns``, built once from a list; analysis code written against it works on both.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, repeat
from typing import Any, Generic, TypeVar

import numpy as np

R = TypeVar("R", bound=tuple)

_BLOCK = 1 << 16   # tuples built per block while iterating: bounded memory, few numpy calls


def _type_name(kind: type, name: str) -> str:
    """A field's declared type by name: records.py's annotations are postponed (ForwardRef)."""
    t = kind.__annotations__.get(name)
    return getattr(t, "__forward_arg__", getattr(t, "__name__", str(t)))


def _is_text(kind: type, name: str) -> bool:
    return _type_name(kind, name) == "str"


def _is_flag(kind: type, name: str) -> bool:
    return _type_name(kind, name) == "bool"


class Columns(Sequence, Generic[R]):
    """Records of the NamedTuple type ``kind`` as one array per field.

    ``arrays[name]``: int64 for numbers, bool for flags, int32 codes into ``tables[name]``
    for text. Immutable: analysis reads records, it never edits a trace's.
    """

    __slots__ = ("kind", "arrays", "tables", "_n")

    def __init__(self, kind: type[R], arrays: dict[str, np.ndarray], tables: dict[str, list[str]]):
        lengths = {len(a) for a in arrays.values()}
        if len(lengths) == 1:   # a field added later with a default (e.g. -1: not recorded) need not be given
            n = next(iter(lengths))
            arrays = {**{f: np.full(n, d, dtype=bool if isinstance(d, bool) else np.int64)
                         for f, d in kind._field_defaults.items() if f not in arrays}, **arrays}
        if set(arrays) != set(kind._fields) or len(lengths) > 1:
            raise ValueError(f"columns for {kind.__name__} need one array of one length per field "
                             f"{kind._fields}, got {sorted(arrays)} of lengths {sorted(lengths)}")
        self.kind, self.arrays, self.tables = kind, arrays, tables
        self._n = lengths.pop() if lengths else 0

    @classmethod
    def from_records(cls, kind: type[R], records: Iterable[R]) -> Columns[R]:
        rows = list(records)
        arrays: dict[str, np.ndarray] = {}
        tables: dict[str, list[str]] = {}
        for i, name in enumerate(kind._fields):
            values = [r[i] for r in rows]
            if _is_text(kind, name):
                arrays[name], tables[name] = encode(values)
            else:
                arrays[name] = np.array(values, dtype=bool if _is_flag(kind, name) else np.int64)
        return cls(kind, arrays, tables)

    # -- the columns ----------------------------------------------------------------
    def column(self, name: str) -> np.ndarray:
        """The field as an array: numbers and flags as stored, text as an object array of str."""
        a = self.arrays[name]
        if name in self.tables:
            return np.asarray(self.tables[name], dtype=object)[a] if len(a) else np.empty(0, dtype=object)
        return a

    def take(self, index: np.ndarray | slice) -> Columns[R]:
        """The records at ``index`` (positions, a boolean mask or a slice), still as columns."""
        return Columns(self.kind, {k: a[index] for k, a in self.arrays.items()}, self.tables)

    # -- the Sequence ---------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.take(i)
        n = self._n
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError("record index out of range")
        return self.kind._make(self._value(name, j) for name in self.kind._fields)

    def _value(self, name: str, j: int) -> Any:
        v = self.arrays[name][j].item()
        return self.tables[name][v] if name in self.tables else v

    def __iter__(self) -> Iterator[R]:
        # chained in C: a generator yielding each record resumed its frame once a record
        return chain.from_iterable(self._blocks())

    def _blocks(self) -> Iterator[Iterator[R]]:
        """The records a block at a time, each block built in C: fields as lists, text looked up in
        its table by numpy, tuples made the way ``kind._make`` makes them, without its frame each."""
        kind, new = repeat(self.kind), tuple.__new__
        tables = {name: np.asarray(t, dtype=object) for name, t in self.tables.items()}
        for lo in range(0, self._n, _BLOCK):
            cols = []
            for name in self.kind._fields:
                block = self.arrays[name][lo:lo + _BLOCK]
                cols.append((tables[name][block] if name in tables else block).tolist())
            yield map(new, kind, zip(*cols))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Columns, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]   # equal to a list, so not hashable

    def __repr__(self) -> str:
        return f"Columns[{self.kind.__name__}]({self._n:,} records)"

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())


def encode(values: Iterable[str]) -> tuple[np.ndarray, list[str]]:
    """Text as int32 codes into a table of its distinct values, in order of first use."""
    codes: dict[str, int] = {}
    out = np.fromiter((codes.setdefault(v, len(codes)) for v in values), dtype=np.int32)
    return out, list(codes)


def column(records: Sequence, name: str) -> np.ndarray:
    """Field ``name`` of ``records`` (a ``Columns`` or a list of NamedTuples) as an array.

    Numbers come back int64 and flags bool, text as an object array; from ``Columns``
    without copying the numbers.
    """
    if isinstance(records, Columns):
        return records.column(name)
    if not records:
        return np.empty(0, dtype=np.int64)
    i = type(records[0])._fields.index(name)
    first = records[0][i]
    if isinstance(first, str):
        return np.array([r[i] for r in records], dtype=object)
    dtype = bool if isinstance(first, bool) else np.int64
    return np.fromiter((r[i] for r in records), dtype=dtype, count=len(records))


def codes(records: Sequence, name: str) -> tuple[np.ndarray, list[str]]:
    """Text field ``name`` of ``records`` as int32 codes into a table of its distinct values:
    ``Columns``' own (no copy), or encoded from a list (in order of first use)."""
    if isinstance(records, Columns):
        return records.arrays[name], records.tables[name]
    if not records:
        return np.empty(0, dtype=np.int32), []
    i = type(records[0])._fields.index(name)
    return encode(r[i] for r in records)
