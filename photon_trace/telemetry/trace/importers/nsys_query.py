"""The SQL that reads an Nsight Systems export: joins and filters in SQLite, rows as tuples out.

The queries here return plain tuples in time order (the small tables: NVTX ranges, waits, names);
the large ones come out as arrays (``nsys_arrays``); ``nsys.py`` turns both into records. What
SQLite does here, so Python never walks a table row by row to find it:

* **One row per runtime call** (``calls``, a temp table): exports before 2023 record a call
  twice under one correlation id (``cudaMemcpy`` as a backtrace event, class 67, and
  ``cudaMemcpy_v3020``); the runtime row is kept, with the backtrace's call chain. Only an
  export where an id repeats pays for that (a window over every call sorts them all).
* **Launch <-> op** by correlation id *within a process* (``globalPid >> 24``): ids restart in
  every process, so a join on the id alone pairs one process's op with another's call.
* **NVTX ranges** with their text inline or through ``textId``, and their domain's name
  from its create event (``eventType`` 75), keyed by process and domain id.
* **Host waits**: calls whose name is a synchronising one (``wait_names``, filled by the
  caller), and async copies touching pageable memory, each with the copy it made, the
  stream a sync waited on, and the innermost NVTX range open on its thread when it began.
"""
from __future__ import annotations

from photon_trace.telemetry.trace.importers.nsys_read import Export

PID = "((globalTid >> 24) & 16777215)"          # the process of a host record
OP_PID = "((globalPid >> 24) & 16777215)"       # the process of a device record
NO_STREAM = 4294967295                          # a sync that waited on no one stream
BACKTRACE_CLASS = 67                            # the duplicate row of old exports
DRIVER_CLASS = 1
NVTX_RANGES = (59, 60, 70, 71)                  # push/pop and start/end ranges (and their NVTXT forms)
NVTX_DOMAIN_CREATE = 75
KERNEL, MEMCPY, MEMSET = 0, 1, 2


def make_calls(x: Export) -> int:
    """Create ``temp.calls`` (one row per runtime or driver call) and its index; how many
    duplicate rows were dropped."""
    if not x.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        x.execute("CREATE TEMP TABLE calls (start INT, end INT, gtid INT, pid INT, corr INT, nameId INT, "
                  "cls INT, chain INT)")
        return 0
    cls = "eventClass" if x.has("CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass") else "0"
    chain = "callchainId" if x.has("CUPTI_ACTIVITY_KIND_RUNTIME", "callchainId") else "NULL"
    rows = "FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start IS NOT NULL AND end IS NOT NULL"
    # Most exports record each call once: copied as they are, with the index the launch join
    # needs, which also says (a distinct count over it) whether any correlation id repeats.
    x.execute(f"""CREATE TEMP TABLE calls AS SELECT start, end, globalTid AS gtid, {PID} AS pid,
                  correlationId AS corr, nameId, {cls} AS cls, {chain} AS chain {rows}""")
    x.execute("CREATE INDEX temp.calls_corr ON calls (pid, corr)")
    keyed, distinct = x.query("SELECT (SELECT count(*) FROM calls WHERE corr != 0), "
                              "(SELECT count(*) FROM (SELECT DISTINCT pid, corr FROM calls WHERE corr != 0))")[0]
    if keyed == distinct:
        return 0
    # A call without a correlation id is its own group (keyed by -rowid): nothing to pair it with.
    key = f"{PID}, COALESCE(NULLIF(correlationId, 0), -rowid)"
    x.execute("DROP TABLE temp.calls")
    x.execute(f"""
        CREATE TEMP TABLE calls AS
        SELECT start, end, gtid, pid, corr, nameId, cls, chain FROM (
            SELECT start, end, globalTid AS gtid, {PID} AS pid, correlationId AS corr, nameId, {cls} AS cls,
                   MAX({chain}) OVER (PARTITION BY {key}) AS chain,
                   ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY {cls} = {BACKTRACE_CLASS}, start DESC) AS k
            {rows})
        WHERE k = 1""")
    x.execute("CREATE INDEX temp.calls_corr ON calls (pid, corr)")
    kept = x.query("SELECT count(*) FROM calls")[0][0]
    total = x.query(f"SELECT count(*) {rows}")[0][0]
    return total - kept


def _payload(x: Export) -> str:
    cols = [c for c in ("int64Value", "uint64Value", "int32Value", "uint32Value") if x.has("NVTX_EVENTS", c)]
    return f"COALESCE({', '.join('n.' + c for c in cols)})" if len(cols) > 1 else (f"n.{cols[0]}" if cols else "NULL")


def make_nvtx(x: Export) -> None:
    """Create ``temp.nvtx``: every closed NVTX range with its text, domain name and payload,
    indexed by thread and start (for the innermost range open at an instant)."""
    x.execute("CREATE TEMP TABLE domains (pid INT, id INT, name TEXT)")
    x.execute("CREATE TEMP TABLE nvtx (start INT, end INT, gtid INT, text TEXT, domain TEXT, payload INT)")
    if not x.has("NVTX_EVENTS"):
        return
    x.execute(f"""INSERT INTO domains
        SELECT {PID.replace('globalTid', 'n.globalTid')}, n.domainId, COALESCE(n.text, s.value)
        FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
        WHERE n.eventType = {NVTX_DOMAIN_CREATE}""")
    x.execute(f"""INSERT INTO nvtx
        SELECT n.start, n.end, n.globalTid, COALESCE(n.text, s.value, ''), COALESCE(d.name, ''), {_payload(x)}
        FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
             LEFT JOIN domains d ON d.pid = {PID.replace('globalTid', 'n.globalTid')} AND d.id = n.domainId
        WHERE n.eventType IN {NVTX_RANGES} AND n.start IS NOT NULL AND n.end IS NOT NULL AND n.end >= n.start""")
    x.execute("CREATE INDEX temp.nvtx_at ON nvtx (gtid, start)")


def nvtx_ranges(x: Export) -> list[tuple[int, int, int, str, str, int | None]]:
    """Every closed NVTX range, by start: ``(t0, t1, gtid, text, domain, payload)``."""
    return x.query("SELECT start, end, gtid, text, domain, payload FROM nvtx ORDER BY start, end DESC")


def nvtx_counts(x: Export) -> list[tuple[str, int]]:
    """Closed NVTX ranges per domain name ('' is the default domain)."""
    return x.query("SELECT domain, count(*) FROM nvtx GROUP BY domain ORDER BY domain")


def wait_calls(x: Export) -> list[tuple]:
    """Host waits, by start: ``(t0, t1, gtid, nameId, what, sync_stream, copy_key, bytes, chain)``.
    ``what`` is the wait's kind (``wait_names``), or ``pageable`` for an async copy to or from
    pageable memory; ``copy_key`` packs the copy's kinds as ``device_ops`` does.
    ``temp.wait_names(id, what)`` must hold the synchronising calls' name ids and
    ``temp.async_copy_names(id, what)`` the async copies'."""
    sync, joins, copy, pageable = "NULL", "", "NULL, NULL", "0"
    if x.has("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "streamId"):
        x.execute(f"""CREATE TEMP TABLE sync_streams AS
                      SELECT {OP_PID} AS pid, correlationId AS corr, MIN(streamId) AS stream
                      FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION GROUP BY 1, 2""")
        x.execute("CREATE INDEX temp.sync_streams_corr ON sync_streams (pid, corr)")
        joins += " LEFT JOIN sync_streams y ON y.pid = c.pid AND y.corr = c.corr"
        sync = "y.stream"
    if x.has("CUPTI_ACTIVITY_KIND_MEMCPY"):
        x.execute(f"""CREATE TEMP TABLE copies AS SELECT {OP_PID} AS pid, correlationId AS corr, copyKind, srcKind,
                      dstKind, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY""")
        x.execute("CREATE INDEX temp.copies_corr ON copies (pid, corr)")
        joins += " LEFT JOIN copies m ON m.pid = c.pid AND m.corr = c.corr"
        copy = "(COALESCE(m.copyKind, 0) << 16) | (COALESCE(m.srcKind, 7) << 8) | COALESCE(m.dstKind, 7), m.bytes"
        pageable = "(m.srcKind = 0 OR m.dstKind = 0) AND a.id IS NOT NULL"
    # Only the waits' copies are looked up: the calls are filtered by name before the join.
    return x.query(f"""
        SELECT c.start, c.end, c.gtid, c.nameId, COALESCE(w.what, 'pageable'), {sync}, {copy}, c.chain
        FROM (SELECT c.* FROM calls c WHERE c.nameId IN (SELECT id FROM wait_names)
                                         OR c.nameId IN (SELECT id FROM async_copy_names)) AS c
             LEFT JOIN wait_names w ON w.id = c.nameId
             LEFT JOIN async_copy_names a ON a.id = c.nameId {joins}
        WHERE w.id IS NOT NULL OR ({pageable})
        ORDER BY c.start, c.end""")


def set_names(x: Export, table: str, rows: list[tuple]) -> None:
    """Fill ``temp.<table>(id, what)`` (a small table of name ids the caller classified)."""
    x.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY, what TEXT)")
    x.con.executemany(f"INSERT OR REPLACE INTO {table} VALUES (?, ?)", rows)


def callchain_frames(x: Export, chains: list[int]) -> list[tuple[int, int, str | None, str | None, int | None]]:
    """``(chain, depth, symbol, module, unresolved)`` of the given CUDA call chains, innermost first."""
    if not chains or not x.has("CUDA_CALLCHAINS"):
        return []
    unresolved = "cc.unresolved" if x.has("CUDA_CALLCHAINS", "unresolved") else "NULL"
    marks = ",".join("?" * len(chains))
    return x.query(f"""SELECT cc.id, cc.stackDepth, s.value, m.value, {unresolved}
                       FROM CUDA_CALLCHAINS cc LEFT JOIN StringIds s ON s.id = cc.symbol
                            LEFT JOIN StringIds m ON m.id = cc.module
                       WHERE cc.id IN ({marks}) ORDER BY cc.id, cc.stackDepth""", tuple(chains))


def callchain_offset(x: Export) -> int:
    """What to add to a call's ``callchainId`` to find its ``CUDA_CALLCHAINS.id``: 0, or 1 where the
    export numbers chains from 1 and calls from 0 (nsys 2022.2 does). Decided by the data: the
    offset under which more chains hold a frame named after their call's function."""
    if not x.has("CUDA_CALLCHAINS", "symbol"):
        return 0
    votes = []
    for off in (0, 1):
        votes.append(x.query(f"""
            SELECT count(*) FROM (SELECT c.chain, s.value AS api FROM calls c JOIN StringIds s ON s.id = c.nameId
                                  WHERE c.chain IS NOT NULL LIMIT 500) AS k
            WHERE EXISTS (SELECT 1 FROM CUDA_CALLCHAINS cc JOIN StringIds f ON f.id = cc.symbol
                          WHERE cc.id = k.chain + {off} AND k.api LIKE f.value || '%')""")[0][0])
    return 1 if votes[1] > votes[0] else 0


def thread_names(x: Export) -> dict[int, str]:
    if not x.has("ThreadNames"):
        return {}
    return {g: n for g, n in x.query("SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s "
                                     "ON s.id = t.nameId")}


def process_names(x: Export) -> dict[int, str]:
    if not x.has("PROCESSES", "pid"):
        return {}
    return {p: n for p, n in x.query("SELECT pid, name FROM PROCESSES") if n}


def gpu_names(x: Export) -> dict[int, str]:
    """Device id -> GPU name (``TARGET_INFO_GPU.id`` is the id the activity tables use)."""
    if not x.has("TARGET_INFO_GPU", "name"):
        return {}
    return {i: n for i, n in x.query("SELECT id, name FROM TARGET_INFO_GPU") if i is not None}


def session_start_ns(x: Export) -> int | None:
    if not x.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        return None
    row = x.query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
    return int(row[0][0]) if row and row[0][0] is not None else None


OVERHEAD_NAMES = ("CUDA profiling data flush overhead", "CUDA profiling stop overhead", "CUDA profiling overhead")
"""The profiler's own stalls that nsys's GPU rules count as busy (``gpustats``' CUDA condition)."""


def profiler_overhead(x: Export) -> list[tuple[int, int, int]]:
    """``(pid, t0, t1)`` of the profiling overheads nsys's gpu_gaps and gpu_time_util count as busy."""
    if not x.has("PROFILER_OVERHEAD", "nameId"):
        return []
    marks = ",".join("?" * len(OVERHEAD_NAMES))
    return x.query(f"""SELECT {PID.replace('globalTid', 'p.globalTid')}, p.start, p.end FROM PROFILER_OVERHEAD p
                       JOIN StringIds s ON s.id = p.nameId WHERE s.value IN ({marks})
                       AND p.start IS NOT NULL AND p.end IS NOT NULL ORDER BY 2""", OVERHEAD_NAMES)
