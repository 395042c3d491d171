"""A large trace file's spans loaded as ``Columns``: a chunk's checked columns appended to
growing arrays, text as codes, never a tuple per row.

Lists of ``HostSpan`` tuples cost ~750 bytes a record through ``check`` (a tuple, its ints and
the list's pointer); as columns ~50. ``file.py`` uses this for every kind of record when a file
is past ``file.py:COLUMNS_FROM`` (1 MB of text); smaller files load as lists. A chunk's
columns come from ``rows.py:check_columns`` (parsed JSON) or the scanners (``row_scan.py``,
``row_scan_compiled.py``: read as arrays).
"""
from __future__ import annotations

import numpy as np

from photon_trace.telemetry.trace.columns import Columns


class ColumnsBuilder:
    """Columns of one record kind (``kind``: the NamedTuple type), a chunk at a time."""

    def __init__(self, kind: type, types: tuple[type, ...]):
        self.kind, self.types = kind, types
        self.parts: list[list[np.ndarray]] = [[] for _ in types]
        self.codes: list[dict[str, int] | None] = [{} if t is str else None for t in types]

    def add(self, columns: list[tuple]) -> None:
        """One chunk's columns (``rows.check_columns``: checked, one tuple per field)."""
        for i, (col, want) in enumerate(zip(columns, self.types)):
            if want is str:
                codes = self.codes[i]
                self.parts[i].append(np.fromiter((codes.setdefault(v, len(codes)) for v in col), dtype=np.int32,
                                                 count=len(col)))
            else:
                self.parts[i].append(np.array(col, dtype=bool if want is bool else np.int64))

    def add_scanned(self, fields: list) -> None:
        """One chunk's fields as the scanners read them: arrays, and text as codes into its own
        strings (made codes into this builder's tables here)."""
        for i, (col, want) in enumerate(zip(fields, self.types)):
            if want is str:
                inverse, strings = col
                codes = self.codes[i]
                lut = np.array([codes.setdefault(s, len(codes)) for s in strings], dtype=np.int32)
                self.parts[i].append(lut[inverse])
            else:
                # a copy made on this thread: glibc keeps what a scan thread's arrays free in that
                # thread's arena, out of the analysis' reach (the 10M-span check peaked at 3.7 GB,
                # not 2.9-3.1, when the parts were the scan threads' own; scan_ahead.py)
                self.parts[i].append(col.copy())

    def finish(self) -> Columns:
        arrays, tables = {}, {}
        for name, want, parts, codes in zip(self.kind._fields, self.types, self.parts, self.codes):
            dtype = np.int32 if want is str else bool if want is bool else np.int64
            arrays[name] = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
            if codes is not None:
                tables[name] = list(codes)
        return Columns(self.kind, arrays, tables)
