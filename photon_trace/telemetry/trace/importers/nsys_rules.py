"""nsys's CUDA API expert rules (``nsys analyze``), reproduced in SQL on the export.

Four of the six rules ``nsys analyze`` runs by default look at API calls and the copies they
made; they are computed here, where the calls' names and the copies' memory kinds are, under
nsys's names and with its definitions:

* ``cuda_api_sync``: ``cudaDeviceSynchronize`` and ``cudaStreamSynchronize`` calls;
* ``cuda_memcpy_sync``: copies made by a synchronous ``cudaMemcpy*`` call (no ``Async``),
  except host-to-device copies of 64 KB or less (the call returns once the data is staged);
* ``cuda_memset_sync``: memsets made by a synchronous ``cudaMemset*`` call on pinned or
  managed memory;
* ``cuda_memcpy_async``: copies made by a ``cudaMemcpy*Async`` call to or from pageable
  memory, which the driver turns synchronous.

Two things differ from nsys's own scripts, both corrections: a call is paired with its
copy by correlation id *within its process* (nsys joins on the id alone, which pairs calls
of one process with copies of another), and a call recorded twice (old exports) counts
once. The GPU rules, ``gpu_gaps`` and ``gpu_time_util``, need only the device's ops and are
analysis of the loaded trace (``telemetry/analysis/gpu_rules.py``).

Each rule gives ``{"title", "count", "total_ns", "rows"}``; ``rows`` are the ``ROW_LIMIT``
longest (nsys's default row limit), in nsys's columns, longest first.
"""
from __future__ import annotations

from photon_trace.telemetry.trace.importers.nsys_query import OP_PID
from photon_trace.telemetry.trace.importers.nsys_read import Export

ROW_LIMIT = 50
SMALL_HTOD_BYTES = 64 * 1024
PINNED, MANAGED, PAGEABLE = 1, 4, 0
HTOD = 1

TITLES = {"cuda_api_sync": "CUDA Synchronization APIs", "cuda_memcpy_sync": "CUDA Synchronous Memcpy",
          "cuda_memset_sync": "CUDA Synchronous Memset", "cuda_memcpy_async": "CUDA Async Memcpy with Pageable Memory"}


def api_rules(x: Export, mem_kinds: dict[int, str]) -> dict[str, dict]:
    """The four API rules (see the module docstring); a rule whose tables are absent is skipped."""
    out = {"cuda_api_sync": _rule(x, "cuda_api_sync", """
        SELECT c.end - c.start AS dur, c.start, c.pid, c.gtid & 16777215, s.value
        FROM calls c JOIN StringIds s ON s.id = c.nameId
        WHERE c.nameId IN (SELECT id FROM StringIds WHERE value LIKE 'cudaDeviceSynchronize%'
                                                     OR value LIKE 'cudaStreamSynchronize%')""",
                                  ("Duration", "Start", "PID", "TID", "API Name"))}
    if x.has("CUPTI_ACTIVITY_KIND_MEMCPY"):
        cols = ("Duration", "Start", "Src Kind", "Dst Kind", "Bytes", "PID", "Device ID", "Context ID",
                "Stream ID", "API Name")
        out["cuda_memcpy_sync"] = _rule(x, "cuda_memcpy_sync", _ops(x, "CUPTI_ACTIVITY_KIND_MEMCPY", "o.srcKind, o.dstKind", f"""
            s.value LIKE 'cudaMemcpy%' AND s.value NOT LIKE '%async%'
            AND NOT (o.copyKind = {HTOD} AND o.bytes <= {SMALL_HTOD_BYTES})"""), cols, mem_kinds, (2, 3))
        out["cuda_memcpy_async"] = _rule(x, "cuda_memcpy_async", _ops(x, "CUPTI_ACTIVITY_KIND_MEMCPY", "o.srcKind, o.dstKind", f"""
            s.value LIKE 'cudaMemcpy%Async%' AND (o.srcKind = {PAGEABLE} OR o.dstKind = {PAGEABLE})"""),
                                         cols, mem_kinds, (2, 3))
    if x.has("CUPTI_ACTIVITY_KIND_MEMSET", "memKind"):
        out["cuda_memset_sync"] = _rule(x, "cuda_memset_sync", _ops(x, "CUPTI_ACTIVITY_KIND_MEMSET", "o.memKind", f"""
            s.value LIKE 'cudaMemset%' AND s.value NOT LIKE '%async%' AND o.memKind IN ({PINNED}, {MANAGED})"""),
                                        ("Duration", "Start", "Memory Kind", "Bytes", "PID", "Device ID",
                                         "Context ID", "Stream ID", "API Name"), mem_kinds, (2,))
    return out


def _ops(x: Export, table: str, kinds: str, where: str) -> str:
    # CROSS JOIN: SQLite then looks each copy's call up by the calls' index, rather than scanning
    # every call (millions, against a few copies).
    pid = OP_PID.replace("globalPid", "o.globalPid")
    ctx = "o.contextId" if x.has(table, "contextId") else "NULL"
    return f"""
        SELECT o.end - o.start AS dur, o.start, {kinds}, o.bytes, {pid}, o.deviceId, {ctx}, o.streamId, s.value
        FROM "{table}" o CROSS JOIN calls c ON c.pid = {pid} AND c.corr = o.correlationId
             JOIN StringIds s ON s.id = c.nameId
        WHERE {where}"""


def _rule(x: Export, name: str, sql: str, cols: tuple[str, ...], mem_kinds: dict[int, str] | None = None,
          kind_cols: tuple[int, ...] = ()) -> dict:
    """Count and total in SQL; the ``ROW_LIMIT`` longest rows, memory kinds named."""
    count, total = x.query(f"SELECT count(*), COALESCE(sum(dur), 0) FROM ({sql})")[0]
    rows = [list(r) for r in x.query(f"{sql} ORDER BY 1 DESC, 2 LIMIT {ROW_LIMIT}")]
    for r in rows:
        for i in kind_cols:
            r[i] = (mem_kinds or {}).get(r[i], str(r[i]))
    return {"title": TITLES[name], "count": int(count), "total_ns": int(total), "columns": list(cols), "rows": rows}
