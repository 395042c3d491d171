"""A trace file's lines parsed and its rows checked, fast: the loader's inner loop.

A 500k-span trace is ~80 chunk lines of 4096-row arrays; parsing them and turning the
rows into records is most of what opening it costs. Three things keep that cheap:

* the cyclic garbage collector is paused while a file loads (``gc_paused``): parsing makes
  ~1.5M lists and tuples, none of them in a cycle, and each collection pass walked all
  those already made (a 500k-span file: 2.5 s to load with it running, 1.1 s paused);
* lines parse with orjson when it is installed (1.1 s -> 0.8 s); a line it refuses is parsed
  again by the standard library, so what loads, and every error, is what ``json.loads`` gives;
* rows are checked a column at a time and made records with C-level calls (no Python
  frame per row); only a chunk with a bad row is walked row by row, to name it.
"""
from __future__ import annotations

import gc
import json
import threading
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path

from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, RequestRecord, StepRecord

try:   # optional: a faster parser for the same JSON (the GPU machine may lack it)
    from orjson import loads as _fast_loads
except ImportError:   # pragma: no cover - depends on the environment
    _fast_loads = None

ROW_TYPES = {
    "host_spans": (HostSpan, (str, int, int, int, int, str, int, int)),
    "device_spans": (DeviceSpan, (str, str, int, int, int, int, int, int, int)),
    "waits": (HostWait, (str, bool, int, int, str, int, int, int)),
    "steps": (StepRecord, (int, str, int, int, int, int, int)),
    "requests": (RequestRecord, (int, str, int, int)),
}
OLDER_WIDTH = {"host_spans": 6, "waits": 6, "device_spans": 7}
"""Rows that grew since version 1, and how wide they were before: host spans and waits gained
``cpu_ns``, ``runq_ns`` in version 2, device spans ``runq_t0``, ``runq_t1`` in version 3. Older
files' rows are this wide and load padded with -1 (not recorded)."""
_PAD = [-1, -1]


def padded(kind: str, rows: list) -> list:
    """An older file's rows of ``kind`` (``OLDER_WIDTH``) with -1 for the counters it did not record."""
    if rows and kind in OLDER_WIDTH and all(type(r) is list and len(r) == OLDER_WIDTH[kind] for r in rows):
        return [r + _PAD for r in rows]
    return rows


class TraceFormatError(ValueError):
    """The file is not a photon_trace trace, or not one this version can read."""


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False


@contextmanager
def gc_paused():
    """The cyclic garbage collector off while inside (nested and concurrent loads too: it
    comes back on when the last one leaves, if it was on when the first came in).
    Reference counting still frees everything that is not in a cycle."""
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


def json_line(path: Path, lineno: int, raw: bytes) -> object:
    """One line's JSON value, as ``json.loads`` gives it (``ValueError`` when it is not JSON)."""
    if _fast_loads is not None:
        try:
            return _fast_loads(raw)
        except ValueError:
            pass    # NaN, huge ints, other encodings, errors: the standard parser decides
    try:
        return json.loads(raw)
    except RecursionError:    # not a ValueError: a line nested thousands deep is corrupt, not cut short
        raise TraceFormatError(f"{path}: line {lineno}: JSON nested too deeply to be a trace line") from None


def check_rows(path: Path, lineno: int, kind: str, rows: list) -> list:
    """A chunk's rows of ``kind`` as records. Checked a column at a time (the rows of a
    500k-span trace in C-speed passes); only when a column is off does the row-by-row check
    run, to name the first bad row and field."""
    cls, types = ROW_TYPES[kind]
    rows = padded(kind, rows)
    if rows and set(map(type, rows)) == {list} and set(map(len, rows)) == {len(types)}:
        # JSON gives exact types, so a set of types per column is the whole check (bool is not int)
        if all(set(map(type, col)) <= {want} for col, want in zip(zip(*rows), types)):
            return list(map(tuple.__new__, repeat(cls, len(rows)), rows))   # what cls._make does, frame-free
    return [check_row(path, lineno, kind, i, r) for i, r in enumerate(rows)]


def check_row(path: Path, lineno: int, kind: str, i: int, row: object):
    cls, types = ROW_TYPES[kind]
    if not isinstance(row, list) or len(row) != len(types):
        got = f"{len(row)} fields" if isinstance(row, list) else type(row).__name__
        raise TraceFormatError(
            f"{path}: line {lineno}: {kind} row {i}: expected {len(types)} fields "
            f"[{', '.join(cls._fields)}], got {got}")
    for name, want, value in zip(cls._fields, types, row):
        ok = isinstance(value, want) and (want is not int or not isinstance(value, bool))
        if not ok:
            raise TraceFormatError(
                f"{path}: line {lineno}: {kind} row {i}: field {name} should be "
                f"{want.__name__}, got {value!r}")
    return cls._make(row)


def check_columns(path: Path, lineno: int, kind: str, rows: list) -> list[tuple]:
    """A chunk's rows of ``kind`` as its columns (one tuple of values per field), checked as
    ``check_rows`` checks them: for a large file loaded into ``Columns`` without a tuple per row."""
    _, types = ROW_TYPES[kind]
    rows = padded(kind, rows)
    if rows and set(map(type, rows)) == {list} and set(map(len, rows)) == {len(types)}:
        cols = list(zip(*rows))
        if all(set(map(type, col)) <= {want} for col, want in zip(cols, types)):
            return cols
    checked = [check_row(path, lineno, kind, i, r) for i, r in enumerate(rows)]
    return list(zip(*checked)) if checked else [() for _ in types]
