"""Writing an Nsight Systems SQLite export ourselves: the tables nsys 2025 writes, a subset of
their columns, filled from lists. For what the real exports (tests/data/nsys) cannot show: our
own engine's NVTX domain read back, and an export of millions of kernels for the benchmark.
A file made here proves consistency only; the real exports are the check against nsys.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

PID = 4242
GTID = (PID << 24) | PID            # the main thread's globalTid
GPID = PID << 24                    # the process's globalPid
RUNTIME, DRIVER = 0, 1
PUSH_POP, DOMAIN_CREATE = 59, 75

SCHEMA = """
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
CREATE TABLE ThreadNames (nameId INT, priority INT, globalTid INT);
CREATE TABLE TARGET_INFO_GPU (id INT, name TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INT, utcTime TEXT, localTime TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, contextId INT, greenContextId INT,
    streamId INT, correlationId INT, globalPid INT, demangledName INT, shortName INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT, end INT, deviceId INT, contextId INT, greenContextId INT,
    streamId INT, correlationId INT, globalPid INT, bytes INT, copyKind INT, srcKind INT, dstKind INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, eventClass INT, globalTid INT, correlationId INT,
    nameId INT, returnValue INT, callchainId INT);
CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, rangeId INT, category INT, color INT, text TEXT,
    globalTid INT, endGlobalTid INT, textId INT, domainId INT, uint64Value INT, int64Value INT);
"""


class ExportWriter:
    """An export being written: ``string`` interns a name; the ``add_*`` methods take rows."""

    def __init__(self, path: Path, version: str = "2025.1.1.110", schema: str = "3.17.1"):
        self.path = Path(path)
        self.path.unlink(missing_ok=True)
        self.con = sqlite3.connect(self.path)
        self.con.executescript(SCHEMA)
        self.con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", version),
            ("EXPORT_SCHEMA_VERSION", schema)])
        self.con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H200')")
        self.con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '')")
        self._ids: dict[str, int] = {}
        self.con.execute("INSERT INTO ThreadNames VALUES (?, 0, ?)", (self.string("MainThread"), GTID))

    def string(self, value: str) -> int:
        i = self._ids.get(value)
        if i is None:
            i = self._ids[value] = len(self._ids) + 1
            self.con.execute("INSERT INTO StringIds VALUES (?, ?)", (i, value))
        return i

    def add_kernels(self, rows) -> None:
        """``(t0, t1, stream, correlation, name_id)`` rows."""
        self.con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, NULL, ?, ?, ?, ?, ?)",
                             ((a, b, s, c, GPID, n, n) for a, b, s, c, n in rows))

    def add_memcpys(self, rows) -> None:
        """``(t0, t1, stream, correlation, bytes, copyKind, srcKind, dstKind)`` rows."""
        self.con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, NULL, ?, ?, ?, ?, ?, ?, ?)",
                             ((a, b, s, c, GPID, n, k, sk, dk) for a, b, s, c, n, k, sk, dk in rows))

    def add_calls(self, rows) -> None:
        """``(t0, t1, correlation, name_id)`` runtime calls on the main thread."""
        self.con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
                             ((a, b, GTID, c, n) for a, b, c, n in rows))

    def add_domain(self, domain_id: int, name: str) -> None:
        self.con.execute("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (0, ?, ?, ?, ?)",
                         (DOMAIN_CREATE, name, GTID, domain_id))

    def add_ranges(self, rows, domain_id: int = 0) -> None:
        """``(t0, t1, text_id, payload)`` push/pop ranges on the main thread (text registered: ``textId``)."""
        self.con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId, domainId, int64Value) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)",
                             ((a, b, PUSH_POP, GTID, t, domain_id, p) for a, b, t, p in rows))

    def close(self) -> Path:
        self.con.commit()
        self.con.close()
        return self.path
