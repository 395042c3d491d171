"""Expected figures of an Nsight Systems export, computed straight from its tables with SQL.

Independent of the importer: nothing here imports photon_trace. Each function is a few
lines of SQL over the export as nsys wrote it, so a figure the importer gets wrong cannot
agree with it by sharing code.
"""
from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

OPS = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
RUNTIME_ROWS = """(SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass IS NULL OR eventClass != 67)"""
"""Old exports also record a call as a backtrace event (class 67) under the same correlation id."""


def open_sample(gz: Path, tmp: Path) -> sqlite3.Connection:
    """The export inside ``gz``, gunzipped into ``tmp``."""
    out = tmp / gz.name.removesuffix(".gz")
    if not out.exists():
        with gzip.open(gz, "rb") as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g)
    return sqlite3.connect(out)


def tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def all_ops(con: sqlite3.Connection) -> str:
    """Every device op as (pid, deviceId, streamId, start, end)."""
    return " UNION ALL ".join(f"SELECT (globalPid >> 24) & 16777215 AS pid, deviceId, streamId, start, end FROM {t}"
                              for t in OPS if t in tables(con))


def idle_by(con: sqlite3.Connection, key: str) -> dict[tuple, tuple[int, int]]:
    """(span, idle) per ``key`` (columns of ``all_ops``): idle is the sum of the stretches between
    an op's start and the furthest end of every op before it (the union's gaps)."""
    rows = con.execute(f"""
        WITH o AS ({all_ops(con)}),
             r AS (SELECT {key}, start, MAX(end) OVER (PARTITION BY {key} ORDER BY start, end
                                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
                   FROM o)
        SELECT {key}, (SELECT MAX(end) FROM o o2 WHERE {' AND '.join(f'o2.{k} = r.{k}' for k in key.split(', '))})
                      - MIN(start), COALESCE(SUM(MAX(start - reach, 0)), 0)
        FROM r GROUP BY {key}""").fetchall()
    return {tuple(r[:-2]): (r[-2], r[-1]) for r in rows}


def sync_calls(con: sqlite3.Connection) -> tuple[int, int]:
    """(count, total ns) of synchronising calls: device/context/stream/event synchronize (runtime
    and driver), blocking cudaMemcpy*/cudaMemset* (no Async), and async copies whose memcpy
    touches pageable memory (kind 0), joined within the process."""
    sync = """(s.value LIKE 'cudaDeviceSynchronize%' OR s.value LIKE 'cuCtxSynchronize%'
               OR s.value LIKE 'cudaStreamSynchronize%' OR s.value LIKE 'cuStreamSynchronize%'
               OR s.value LIKE 'cudaEventSynchronize%' OR s.value LIKE 'cuEventSynchronize%'
               OR ((s.value LIKE 'cudaMemcpy%' OR s.value LIKE 'cuMemcpy%' OR s.value LIKE 'cudaMemset%'
                    OR s.value LIKE 'cuMemset%') AND s.value NOT LIKE '%Async%'))"""
    pageable = "0"
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables(con):
        pageable = """(s.value LIKE 'cu%Memcpy%Async%' AND EXISTS (
            SELECT 1 FROM CUPTI_ACTIVITY_KIND_MEMCPY m WHERE m.correlationId = r.correlationId
            AND (m.globalPid >> 24) & 16777215 = (r.globalTid >> 24) & 16777215 AND (m.srcKind = 0 OR m.dstKind = 0)))"""
    return con.execute(f"""SELECT count(*), COALESCE(SUM(r.end - r.start), 0) FROM {RUNTIME_ROWS} r
                           JOIN StringIds s ON s.id = r.nameId WHERE {sync} OR {pageable}""").fetchone()


def pageable_copies(con: sqlite3.Connection) -> tuple[int, int]:
    """(count, bytes) of copies made by async memcpy calls to or from pageable memory."""
    if "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables(con):
        return 0, 0
    return con.execute(f"""SELECT count(*), COALESCE(SUM(m.bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY m
                           JOIN {RUNTIME_ROWS} r ON r.correlationId = m.correlationId
                                AND (r.globalTid >> 24) & 16777215 = (m.globalPid >> 24) & 16777215
                           JOIN StringIds s ON s.id = r.nameId
                           WHERE s.value LIKE 'cudaMemcpy%Async%' AND (m.srcKind = 0 OR m.dstKind = 0)""").fetchone()


def nvtx_per_domain(con: sqlite3.Connection) -> dict[str, int]:
    """Closed push/pop and start/end ranges per domain name (from the domains' create events)."""
    if "NVTX_EVENTS" not in tables(con):
        return {}
    # The names in one pass, then a join: a subquery per range scanned the whole table for each
    # of nvFuser's 13.5k ranges (6 s, quadratic). No export here names a domain twice in a process.
    rows = con.execute("""
        WITH names AS (SELECT d.domainId AS domain, d.globalTid >> 24 AS process, COALESCE(d.text, ds.value) AS name
                       FROM NVTX_EVENTS d LEFT JOIN StringIds ds ON ds.id = d.textId
                       WHERE d.eventType = 75 GROUP BY 1, 2)
        SELECT COALESCE(names.name, ''), count(*)
        FROM NVTX_EVENTS n LEFT JOIN names ON names.domain = n.domainId AND names.process = (n.globalTid >> 24)
        WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL GROUP BY 1""").fetchall()
    return dict(rows)


def gpu_gaps(con: sqlite3.Connection, threshold_ns: int = 500_000_000) -> list[tuple[int, int]]:
    """(duration, start) of gaps over the threshold per process and device, as nsys's rule finds
    them: the i-th op end (by end) paired with the (i+1)-th op start (by start)."""
    return con.execute(f"""
        WITH o AS ({all_ops(con)}),
             s AS (SELECT ROW_NUMBER() OVER (ORDER BY pid, deviceId, start) AS n, start, pid, deviceId FROM o),
             e AS (SELECT ROW_NUMBER() OVER (ORDER BY pid, deviceId, end) AS n, end, pid, deviceId FROM o)
        SELECT s.start - e.end, e.end FROM s JOIN e ON s.n - 1 = e.n AND s.pid = e.pid AND s.deviceId = e.deviceId
        WHERE s.start - e.end > {threshold_ns} ORDER BY 1 DESC, 2""").fetchall()


def gpu_time_util(con: sqlite3.Connection, chunks: int = 30, threshold: float = 50) -> list[tuple]:
    """(in-use %, duration, start) of the low-utilisation chunks, consecutive ones merged, as nsys's
    rule defines them (ops overlapping a chunk add their time inside it)."""
    return con.execute(f"""
        WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < {chunks}),
             o AS ({all_ops(con)}),
             r AS (SELECT pid, deviceId, MIN(start) AS a, MAX(end) AS b,
                          CAST((MAX(end) - MIN(start) + {chunks} - 1) / {chunks} AS INTEGER) AS size
                   FROM o GROUP BY pid, deviceId),
             c AS (SELECT r.pid, r.deviceId, k.i, r.a + k.i * r.size AS cs, MIN(r.a + (k.i + 1) * r.size, r.b) AS ce
                   FROM r, k WHERE r.a + k.i * r.size < r.b),
             u AS (SELECT c.pid, c.deviceId, c.i, c.cs, c.ce,
                          100.0 * COALESCE(SUM(MIN(o.end, c.ce) - MAX(o.start, c.cs)), 0) / (c.ce - c.cs) AS pct
                   FROM c LEFT JOIN o ON o.pid = c.pid AND o.deviceId = c.deviceId AND o.start < c.ce AND o.end > c.cs
                   GROUP BY c.pid, c.deviceId, c.i HAVING pct < {threshold}),
             g AS (SELECT *, i - ROW_NUMBER() OVER (PARTITION BY pid, deviceId ORDER BY i) AS grp FROM u)
        SELECT ROUND(SUM((ce - cs) * pct) / SUM(ce - cs), 1), MAX(ce) - MIN(cs), MIN(cs)
        FROM g GROUP BY pid, deviceId, grp ORDER BY 1, 2""").fetchall()


def api_sync(con: sqlite3.Connection) -> tuple[int, int]:
    """cuda_api_sync: (count, total ns) of cudaDeviceSynchronize and cudaStreamSynchronize calls."""
    return con.execute(f"""SELECT count(*), COALESCE(SUM(r.end - r.start), 0) FROM {RUNTIME_ROWS} r
                           JOIN StringIds s ON s.id = r.nameId
                           WHERE s.value LIKE 'cudaDeviceSynchronize%' OR s.value LIKE 'cudaStreamSynchronize%'
                           """).fetchone()


def memcpy_sync(con: sqlite3.Connection) -> tuple[int, int]:
    """cuda_memcpy_sync: (count, total ns) of copies by a cudaMemcpy* without Async, bar
    host-to-device copies of at most 64 KB."""
    if "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables(con):
        return 0, 0
    return con.execute(f"""SELECT count(*), COALESCE(SUM(m.end - m.start), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY m
                           JOIN {RUNTIME_ROWS} r ON r.correlationId = m.correlationId
                                AND (r.globalTid >> 24) & 16777215 = (m.globalPid >> 24) & 16777215
                           JOIN StringIds s ON s.id = r.nameId
                           WHERE s.value LIKE 'cudaMemcpy%' AND s.value NOT LIKE '%Async%'
                             AND NOT (m.copyKind = 1 AND m.bytes <= 65536)""").fetchone()
