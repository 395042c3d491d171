"""Opening an Nsight Systems SQLite export (``nsys export --type sqlite``) and checking it is one.

An export is an SQLite database: one table per kind of activity (``CUPTI_ACTIVITY_KIND_KERNEL``,
``..._MEMCPY``, ``..._RUNTIME``, ``NVTX_EVENTS``, ``OSRT_API``...), names interned in
``StringIds``, and a metadata table naming the product and schema version. What varies from
nsys 2022.2 to 2025.x, and is read here once so the queries need not care:

* the metadata table is ``EXPORT_META_DATA`` (up to 2022) or ``META_DATA_EXPORT`` (later);
* a table is absent when nothing of its kind happened (a report without kernels has no
  ``CUPTI_ACTIVITY_KIND_KERNEL``), and older exports also hold empty ones;
* columns came later (``greenContextId``, ``deprecatedSyncType``, ``binaryData``, ``callchainId``):
  ``Export.has(table, column)`` says whether one is there;
* the ``ENUM_*`` tables that name memory, copy and sync kinds are missing from older exports:
  ``kind_labels`` falls back to CUPTI's own numbering.

A ``.sqlite.gz`` is read from an in-memory copy. An export whose import would not fit in the
memory available is refused before its rows are read (``check_fits``). A ``.nsys-rep`` (the report itself, not an
export) is refused with the command that exports it. What is wrong is a ``NsysFormatError``
naming the file and the problem: not SQLite, corrupt, an SQLite database that is not an
Nsight export, a table without a column every version has.
"""
from __future__ import annotations

import gzip
import sqlite3
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from photon_trace.telemetry.trace.file import TraceFormatError
from photon_trace.telemetry.trace.file_signs import REPORT_SUFFIXES, SQLITE_MAGIC
from photon_trace.telemetry.trace.fit import BASE_BYTES, BUDGET_ENV, TraceTooLargeError, available

META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
MAX_GZ_BYTES = 4 * 1024 ** 3   # a .sqlite.gz is expanded in memory: refuse more than this

# Columns every schema from 2022.2 on has; a table without one cannot be read.
REQUIRED = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "deviceId", "streamId", "correlationId", "globalPid"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "deviceId", "streamId", "correlationId", "globalPid",
                                   "bytes", "copyKind", "srcKind", "dstKind"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "globalTid", "correlationId", "nameId"),
    "NVTX_EVENTS": ("start", "end", "eventType", "text", "globalTid", "textId", "domainId"),
    "OSRT_API": ("start", "end", "globalTid", "nameId"),
    "StringIds": ("id", "value"),
}

ACTIVITY_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                   "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API")
BYTES_PER_ROW = 320
"""Peak RSS per row of the activity tables under ``check`` (import, analysis, gate): 3.08 GB at
10.2M rows, an export of 5M kernels (docs/measurements.md "Nsight Systems exports")."""

# CUPTI's numbering, for exports without the ENUM_* tables (2022.2 has none).
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
             6: "Managed Static", 7: "Unknown"}
COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "Unified HtoD", 12: "Unified DtoH", 13: "Unified DtoD"}
SYNC_KINDS = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}
_COPY_ENUM_SHORT = {"Host-to-Device": "HtoD", "Device-to-Host": "DtoH", "Host-to-Array": "HtoA",
                    "Array-to-Host": "AtoH", "Array-to-Array": "AtoA", "Array-to-Device": "AtoD",
                    "Device-to-Array": "DtoA", "Device-to-Device": "DtoD", "Host-to-Host": "HtoH",
                    "Peer-to-Peer": "PtoP", "Unified Host-to-Device": "Unified HtoD",
                    "Unified Device-to-Host": "Unified DtoH", "Unified Device-to-Device": "Unified DtoD"}


class NsysFormatError(TraceFormatError):
    """Not an Nsight Systems SQLite export, or one that cannot be read (the message says why)."""


@dataclass
class Export:
    """An open export: its connection, tables with their columns, and metadata."""
    path: str
    con: sqlite3.Connection
    tables: dict[str, frozenset[str]]
    meta: dict[str, str]
    meta_table: str
    problems: dict = field(default_factory=dict)   # kind -> {"count", "first"}
    in_memory: bool = False                        # expanded from a .sqlite.gz into memory

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.tables.get(table)
        return cols is not None and (column is None or column in cols)

    def rows(self, table: str) -> int:
        return self.con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] if self.has(table) else 0

    def query(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        try:
            return self.con.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise NsysFormatError(f"{self.path}: a corrupt or unreadable Nsight export ({e})") from None

    def execute(self, sql: str) -> None:
        try:
            self.con.execute(sql)
        except sqlite3.DatabaseError as e:
            raise NsysFormatError(f"{self.path}: a corrupt or unreadable Nsight export ({e})") from None

    @property
    def product_version(self) -> str | None:
        return self.meta.get("EXPORT_PRODUCT_VERSION")

    @property
    def schema_version(self) -> str | None:
        return self.meta.get("EXPORT_SCHEMA_VERSION")


def is_report(path: str | Path) -> bool:
    """A ``.nsys-rep`` (or the older ``.qdrep``): the report, which only nsys reads."""
    return str(path).endswith(REPORT_SUFFIXES)


def export_command(path: str | Path) -> str:
    """The one line that turns a report into what this importer reads."""
    p = Path(path)
    out = p.with_name(p.name.rsplit(".", 1)[0] + ".sqlite")
    return f"nsys export --type sqlite --output {out} {p}"


def looks_like_sqlite(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC)


def open_export(path: str | Path) -> Export:
    """The export at ``path`` (``.sqlite`` or ``.sqlite.gz``), checked (see the module docstring)."""
    path = Path(path)
    if is_report(path):
        raise NsysFormatError(f"{path}: an Nsight Systems report; export it first: {export_command(path)}")
    con = _connect(path)
    try:
        tables = _tables(path, con)
    except sqlite3.DatabaseError as e:
        con.close()
        raise NsysFormatError(f"{path}: a corrupt SQLite file ({e})") from None
    meta_table = next((t for t in META_TABLES if t in tables), None)
    if meta_table is None or "StringIds" not in tables:
        con.close()
        shown = ", ".join(sorted(tables)[:8]) or "none"
        raise NsysFormatError(f"{path}: an SQLite database, but not an Nsight Systems export "
                              f"(no {' or '.join(META_TABLES)} and StringIds tables; tables: {shown})")
    try:
        meta = {str(k): str(v) for k, v in con.execute(f'SELECT name, value FROM "{meta_table}"')}
    except sqlite3.DatabaseError as e:
        con.close()
        raise NsysFormatError(f"{path}: a corrupt Nsight export: its {meta_table} table cannot be read ({e})") from None
    product = meta.get("EXPORT_PRODUCT_NAME", "")
    if product and "Nsight Systems" not in product:
        con.close()
        raise NsysFormatError(f"{path}: exported by {product!r}, not by Nsight Systems")
    for table, cols in REQUIRED.items():
        missing = [c for c in cols if table in tables and c not in tables[table]]
        if missing:
            con.close()
            raise NsysFormatError(f"{path}: table {table} lacks column(s) {', '.join(missing)}: "
                                  f"not an Nsight export this importer reads")
    in_memory = con.execute("PRAGMA database_list").fetchone()[2] != str(path.resolve())
    return Export(str(path), con, tables, meta, meta_table, in_memory=in_memory)


def _connect(path: Path) -> sqlite3.Connection:
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise NsysFormatError(f"{path}: cannot read: {e.strerror or e}") from None
    if head.startswith(b"\x1f\x8b"):
        return _connect_gz(path)
    if not looks_like_sqlite(head):
        raise NsysFormatError(f"{path}: not an SQLite database (an Nsight export starts with "
                              f"{SQLITE_MAGIC[:15].decode()!r})")
    # Read-only and immutable: exports are never written, and often sit in read-only folders.
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        return sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.DatabaseError as e:
        raise NsysFormatError(f"{path}: cannot open it as SQLite ({e})") from None


def _connect_gz(path: Path) -> sqlite3.Connection:
    """A gzipped export, expanded into an in-memory database (SQLite reads only files or memory)."""
    try:
        with gzip.open(path, "rb") as f:
            data = f.read(MAX_GZ_BYTES + 1)
    except EOFError:
        raise NsysFormatError(f"{path}: the gzip stream is cut short") from None
    except (OSError, zlib.error) as e:
        raise NsysFormatError(f"{path}: a corrupt gzip stream ({e})") from None
    if len(data) > MAX_GZ_BYTES:
        raise NsysFormatError(f"{path}: expands to more than {MAX_GZ_BYTES} bytes; gunzip it and import the .sqlite")
    if not looks_like_sqlite(data):
        raise NsysFormatError(f"{path}: gzip, but not of an SQLite database")
    con = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        con.deserialize(data)
    except sqlite3.DatabaseError as e:
        con.close()
        raise NsysFormatError(f"{path}: a corrupt SQLite file inside the gzip ({e})") from None
    return con


def _tables(path: Path, con: sqlite3.Connection) -> dict[str, frozenset[str]]:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    return {n: frozenset(r[1] for r in con.execute(f'PRAGMA table_info("{n}")')) for n in names}


def kind_labels(export: Export, table: str, builtin: dict[int, str]) -> dict[int, str]:
    """An ``ENUM_*`` table's labels by id (copy kinds shortened to HtoD...), else ``builtin``."""
    if not export.has(table, "id") or not export.has(table, "label"):
        return dict(builtin)
    rows = export.query(f'SELECT id, label FROM "{table}"')
    out = dict(builtin)
    out.update({int(i): _COPY_ENUM_SHORT.get(str(label), str(label)) for i, label in rows if i is not None})
    return out


def check_fits(x: Export) -> dict[str, int]:
    """The rows of each activity table present; ``TraceTooLargeError`` first when importing and
    analysing them would need more memory than is available (``fit.available``: the machine's,
    a cgroup's, or ``PHOTON_TRACE_MEMORY_BUDGET``). A ``.sqlite.gz`` also holds the database itself."""
    rows = {t: x.rows(t) for t in ACTIVITY_TABLES if x.has(t)}
    db = x.query("PRAGMA page_count")[0][0] * x.query("PRAGMA page_size")[0][0] if x.in_memory else 0
    need = BASE_BYTES + BYTES_PER_ROW * sum(rows.values()) + db
    have, where = available()
    if have is not None and need > have:
        raise TraceTooLargeError(
            f"{x.path}: too large for the memory available: importing it needs ~{_size(need)} "
            f"({sum(rows.values()):,} activity rows x ~{BYTES_PER_ROW} B each"
            f"{f', and the {_size(db)} database held in memory' if db else ''}), and "
            f"{_size(have)} is available ({where}); free memory, use a machine with more, or set "
            f"{BUDGET_ENV}=off to import it anyway")
    return rows


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.1f} MB"
