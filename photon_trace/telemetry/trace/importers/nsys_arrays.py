"""The large tables of an Nsight Systems export (device ops, runtime calls, OS runtime calls) as
numpy arrays straight from SQLite, never one Python tuple per row.

Python's ``sqlite3`` can only hand rows out as tuples: ~2 s per million rows of a few integers
on this project's machine, and a Python object per value while they are held. Here each query's
result is first written to a temp table (its joins, filters and sort done in SQLite), then each
column comes out as one ``group_concat`` string that numpy parses: ~0.2 s per million values, and
only the text of one column held at a time. The per-row codes (a device op's lane and name) are
looked up in SQLite against small tables of the distinct values and renumbered here in order of
first use, so Python works per lane and per name, not per op.

A column must hold integers only (``group_concat`` drops NULLs: every column read here is
``COALESCE``d or filtered); a value that is not one (a corrupt export) is an ``NsysFormatError``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from photon_trace.telemetry.trace.importers.nsys_query import DRIVER_CLASS, KERNEL, MEMCPY, MEMSET, OP_PID
from photon_trace.telemetry.trace.importers.nsys_read import Export, NsysFormatError


def fetch(x: Export, table: str, exprs: dict[str, str], n: int) -> dict[str, np.ndarray]:
    """``{name: int64 array}`` of each SQL expression over the ``n`` rows of ``table`` (as
    ``FROM {table} AS o``), in rowid order: the order the table was written in."""
    out = {}
    for name, expr in exprs.items():
        text = x.query(f"SELECT group_concat({expr}) FROM (SELECT * FROM {table} ORDER BY rowid) AS o")[0][0]
        a = np.empty(0, dtype=np.int64)
        if text is not None:
            # A value that is no integer ends the parse short (a warning), or raises (newer numpy).
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                try:
                    a = np.fromstring(text, dtype=np.int64, sep=",")
                except ValueError:
                    a = a[:0]
        if len(a) != n:
            raise NsysFormatError(f"{x.path}: a corrupt Nsight export: {table}.{name} holds values that are "
                                  f"not integers or are missing ({len(a):,} read of {n:,})")
        out[name] = a
    return out


@dataclass
class OpArrays:
    """Every kernel, memcpy and memset by (start, end). ``lane`` codes into ``lanes`` (per lane
    ``(pid, device, stream, ops, busy_ns, first_start, last_end)``, in order of first op), ``name``
    into ``names`` (``(kind, key)``: ``key`` a kernel's name id, a memcpy's ``copyKind << 16 |
    srcKind << 8 | dstKind``, a memset's memory kind). ``enqueued``: the launching call's start,
    where ``linked``."""
    lane: np.ndarray
    name: np.ndarray
    t0: np.ndarray
    t1: np.ndarray
    enqueued: np.ndarray
    linked: np.ndarray
    lanes: list[tuple]
    names: list[tuple]
    kinds: dict[int, int]

    def __len__(self) -> int:
        return len(self.t0)


def device_ops(x: Export) -> OpArrays:
    """The device ops (see ``OpArrays``); ``temp.calls`` must exist (``nsys_query.make_calls``)."""
    parts = []
    if x.has("CUPTI_ACTIVITY_KIND_KERNEL"):
        name = "COALESCE(o.demangledName, o.shortName)" if x.has("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName") \
            else "o.shortName"
        parts.append(_ops_sql("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL, name))
    if x.has("CUPTI_ACTIVITY_KIND_MEMCPY"):
        parts.append(_ops_sql("CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY,
                              "(COALESCE(o.copyKind, 0) << 16) | (COALESCE(o.srcKind, 7) << 8) | COALESCE(o.dstKind, 7)"))
    if x.has("CUPTI_ACTIVITY_KIND_MEMSET"):
        mem = "COALESCE(o.memKind, 7)" if x.has("CUPTI_ACTIVITY_KIND_MEMSET", "memKind") else "7"
        parts.append(_ops_sql("CUPTI_ACTIVITY_KIND_MEMSET", MEMSET, mem))
    empty = "SELECT 0 AS kind, 0 AS pid, 0 AS dev, 0 AS stream, 0 AS start, 0 AS end, 0 AS enq, 0 AS key WHERE 0"
    x.execute(f"CREATE TEMP TABLE ops AS {' UNION ALL '.join(parts) or empty} ORDER BY 5, 6")
    # The distinct lanes and names (a DISTINCT keeps a small tree of them; a GROUP BY would sort every op).
    x.execute("CREATE TEMP TABLE op_lanes AS SELECT DISTINCT pid, dev, stream FROM ops")
    x.execute("CREATE UNIQUE INDEX temp.op_lanes_key ON op_lanes (pid, dev, stream)")
    x.execute("CREATE TEMP TABLE op_names AS SELECT DISTINCT kind, key FROM ops")
    x.execute("CREATE UNIQUE INDEX temp.op_names_key ON op_names (kind, key)")
    lanes = x.query("SELECT pid, dev, stream FROM op_lanes ORDER BY rowid")
    names = x.query("SELECT kind, key FROM op_names ORDER BY rowid")
    n = x.query("SELECT count(*) FROM ops")[0][0]
    # Fewer, longer columns cost less (each is a pass over the table): a lane and a name in one
    # integer, and "no launch found" as -1 (a call's start is never negative: times count from
    # the session's start, and a trace's times below 0 are refused as implausible anyway).
    a = fetch(x, "ops", {
        "code": "(SELECT l.rowid - 1 FROM op_lanes l WHERE l.pid IS o.pid AND l.dev IS o.dev AND l.stream IS o.stream)"
                " * 4294967296 + (SELECT m.rowid - 1 FROM op_names m WHERE m.kind = o.kind AND m.key IS o.key)",
        "t0": "o.start", "t1": "o.end", "enqueued": "COALESCE(o.enq, -1)"}, n)
    linked = a["enqueued"] != -1
    enqueued = np.where(linked, a["enqueued"], 0)
    # Lanes and names numbered in order of first op, each lane with its ops, busy time and extent.
    lane, lane_order = _renumber(a["code"] >> 32, len(lanes))
    name, name_order = _renumber(a["code"] & 0xFFFFFFFF, len(names))
    t0, t1 = a["t0"], a["t1"]
    count = np.bincount(lane, minlength=len(lane_order))
    busy = np.zeros(len(lane_order), dtype=np.int64)
    np.add.at(busy, lane, t1 - t0)
    first = np.full(len(lane_order), np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(len(lane_order), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, lane, t0)
    np.maximum.at(last, lane, t1)
    stats = zip(count.tolist(), busy.tolist(), first.tolist(), last.tolist())
    kinds: dict[int, int] = {}
    for i, c in zip(name_order, np.bincount(name, minlength=len(name_order)).tolist()):
        kinds[names[i][0]] = kinds.get(names[i][0], 0) + c
    return OpArrays(lane.astype(np.int32), name.astype(np.int32), t0, t1, enqueued, linked,
                    [(*lanes[i], *st) for i, st in zip(lane_order, stats)], [names[i] for i in name_order], kinds)


def _renumber(codes: np.ndarray, k: int) -> tuple[np.ndarray, list[int]]:
    """Codes renumbered in order of first use, and the old code of each new one."""
    first = np.full(k, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int64))
    order = np.argsort(first, kind="stable")
    remap = np.empty(k, dtype=np.int64)
    remap[order] = np.arange(k)
    return remap[codes], order.tolist()


def _ops_sql(table: str, kind: int, name: str) -> str:
    pid = OP_PID.replace("globalPid", "o.globalPid")
    return f"""SELECT {kind} AS kind, {pid} AS pid, o.deviceId AS dev, o.streamId AS stream, o.start AS start,
                      o.end AS end, c.start AS enq, {name} AS key
               FROM "{table}" AS o LEFT JOIN calls AS c ON c.pid = {pid} AND c.corr = o.correlationId
               WHERE o.start IS NOT NULL AND o.end IS NOT NULL"""


@dataclass
class HostArrays:
    """Host calls as arrays, in the order of their table: ``gtid`` the thread, ``name_id`` into
    ``StringIds``, ``driver`` a driver (not runtime) call."""
    t0: np.ndarray
    t1: np.ndarray
    gtid: np.ndarray
    name_id: np.ndarray
    driver: np.ndarray

    def __len__(self) -> int:
        return len(self.t0)


def host_calls(x: Export) -> HostArrays:
    """Every runtime and driver call (``temp.calls``, one row per call)."""
    n = x.query("SELECT count(*) FROM calls")[0][0]
    a = fetch(x, "calls", {"t0": "o.start", "t1": "o.end", "gtid": "COALESCE(o.gtid, 0)",   # name and kind in one
                           "name": f"COALESCE(o.nameId, -1) * 2 + COALESCE(o.cls = {DRIVER_CLASS}, 0)"}, n)
    return HostArrays(a["t0"], a["t1"], a["gtid"], a["name"] >> 1, (a["name"] & 1).astype(bool))


def osrt_calls(x: Export) -> HostArrays:
    """OS runtime calls (when recorded), nsys's own markers (thread 0) left out."""
    if not x.has("OSRT_API"):
        e = np.empty(0, dtype=np.int64)
        return HostArrays(e, e, e, e, e.astype(bool))
    x.execute("""CREATE TEMP TABLE osrt AS SELECT start, end, globalTid AS gtid, nameId FROM OSRT_API
                 WHERE start IS NOT NULL AND end IS NOT NULL AND (globalTid & 16777215) != 0
                 ORDER BY start, end DESC""")
    n = x.query("SELECT count(*) FROM osrt")[0][0]
    a = fetch(x, "osrt", {"t0": "o.start", "t1": "o.end", "gtid": "o.gtid", "name_id": "COALESCE(o.nameId, -1)"}, n)
    return HostArrays(a["t0"], a["t1"], a["gtid"], a["name_id"], np.zeros(n, dtype=bool))


def distinct_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct, codes)``: the sorted distinct values and each value's position among them (a
    sort, not ``np.unique``, whose hash path is slow on millions of int64 in numpy 2.4)."""
    if not len(values):
        return np.empty(0, dtype=values.dtype), np.empty(0, dtype=np.int32)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.empty(len(ordered), dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    codes = np.empty(len(ordered), dtype=np.int32)
    codes[order] = np.cumsum(new) - 1
    return ordered[new], codes


def first_use(codes: np.ndarray, table: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes into ``table`` as codes into a table of the strings used, in order of first use, equal
    strings sharing one code: the form ``columns.encode`` gives a list of strings."""
    n = len(codes)
    if not n:
        return np.empty(0, dtype=np.int32), []
    first = np.full(len(table), n, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
    texts: dict[str, int] = {}
    remap = np.zeros(len(table), dtype=np.int32)
    for c in np.argsort(first, kind="stable").tolist():
        if first[c] == n:
            break
        remap[c] = texts.setdefault(table[c], len(texts))
    return remap[codes], list(texts)


def distinct(values: np.ndarray) -> list[int]:
    """The distinct values, sorted (steps: small integers, counted; else sorted)."""
    if not len(values):
        return []
    lo, hi = int(values.min()), int(values.max())
    if hi - lo <= 4 * len(values) + 4096:
        return (np.flatnonzero(np.bincount(values - lo)) + lo).tolist()
    return distinct_codes(values)[0].tolist()
