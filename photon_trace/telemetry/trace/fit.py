"""Will a trace fit? Its load's memory, estimated from the file before reading it, against what
the machine (or its cgroup) has available: a trace that cannot fit is refused up front, with
both figures, instead of exhausting the machine half-way through.

**The estimate.** The first MB of the file is read (decompressed when gzipped): it gives the
compression ratio and how many records a byte of the text holds (a Kineto event is one
``"ph"`` key; a row of our files one ``],[``). The file's size times those is the record
count, and the count times the measured peak memory per record (``BYTES_PER_EVENT``,
``BYTES_PER_ROW`` or ``BYTES_PER_COLUMN_ROW``: import, analysis and gate, docs/import_scale.md)
plus the interpreter's own (``BASE_BYTES``) is the estimate. It is an estimate: a file whose first MB
is unlike the rest (a long metadata block) is misjudged by that much.

**Available**: ``MemAvailable`` of /proc/meminfo, or less where a cgroup limit (v2
``memory.max`` less ``memory.current``; v1 ``memory.limit_in_bytes`` less usage; the inactive
file cache, which the kernel reclaims, not counted as used) leaves less.
``PHOTON_TRACE_MEMORY_BUDGET`` sets the figure instead (bytes, or ``512M``, ``4G``), or ``off``
to load whatever the estimate says.
"""
from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from typing import NamedTuple

from photon_trace.telemetry.trace.rows import TraceFormatError

BUDGET_ENV = "PHOTON_TRACE_MEMORY_BUDGET"
BASE_BYTES = 80 << 20
"""The interpreter, numpy and the analysis modules, before any record (``check`` of a 15k-event
trace: 69 MB peak RSS)."""
BYTES_PER_EVENT = 450
"""Peak RSS per Kineto event of ``check`` (import, analysis, gate): 532 MB at 1.03M events
(docs/import_scale.md)."""
BYTES_PER_ROW = 750
"""Peak RSS per record of one of our own trace files under ``check`` when its records load as
lists (a file under ``columns_from`` bytes of text): 537 MB at 626k records (docs/import_scale.md)."""
BYTES_PER_COLUMN_ROW = 250
"""The same for a file whose records load as columns (``columns_from`` bytes of text or more,
``telemetry/trace/file.py:COLUMNS_FROM``): 367 MB at ~1.49M estimated records, 3,043 MB at ~14.6M,
~200-210 B each; 250 leaves a margin. With 750 a 4 GB budget refused a 10M-span file that fits."""
_SAMPLE = 1 << 20
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class TraceTooLargeError(TraceFormatError):
    """The trace would need more memory than is available (the message gives both, and the override)."""


class Estimate(NamedTuple):
    records: int          # events (Kineto) or rows (ours), estimated
    bytes: int            # peak memory the load and analysis will need, estimated
    how: str              # how the figure was reached, for the message


def estimate(path: Path, kind: str, columns_from: int | None = None) -> Estimate:
    """The records and memory a load of ``path`` (``kind``: "kineto" or "ours") will need. Our
    own files of ``columns_from`` bytes of text or more load as columns (None: never)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(_SAMPLE)
    text, ratio = head, 1.0
    if head.startswith(b"\x1f\x8b"):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            text = d.decompress(head, _SAMPLE)
        except zlib.error:
            return Estimate(0, 0, "a corrupt gzip stream")      # the reader says what is wrong
        used = len(head) - len(d.unconsumed_tail)
        ratio = len(text) / max(used, 1)
    if kind == "kineto":
        marker, per = b'"ph"', BYTES_PER_EVENT
    else:
        as_columns = columns_from is not None and size * ratio >= columns_from
        marker, per = b"],[", BYTES_PER_COLUMN_ROW if as_columns else BYTES_PER_ROW
    density = text.count(marker) / max(len(text), 1)
    records = int(size * ratio * density)
    how = (f"~{records:,} {'events' if kind == 'kineto' else 'records'} ({_gb(size)} on disk"
           f"{f' x {ratio:.1f} decompressed' if ratio != 1.0 else ''}, at the density of its first MB) "
           f"x ~{per} B each")
    return Estimate(records, BASE_BYTES + records * per, how)


def available() -> tuple[int | None, str]:
    """The memory a load may use and where the figure comes from; None: no limit (the override)."""
    budget = os.environ.get(BUDGET_ENV, "").strip()
    if budget:
        if budget.lower() in ("off", "none", "unlimited"):
            return None, f"{BUDGET_ENV}={budget}"
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", budget, re.IGNORECASE)
        if m is None:
            raise TraceFormatError(f"{BUDGET_ENV}={budget!r}: give bytes (e.g. 4G, 512M) or 'off'")
        return int(float(m[1]) * _UNITS[m[2].upper()]), f"{BUDGET_ENV}={budget}"
    best, where = None, ""
    mem = _meminfo_available()
    if mem is not None:
        best, where = mem, "MemAvailable in /proc/meminfo"
    limit = _cgroup_left()
    if limit is not None and (best is None or limit < best):
        best, where = limit, "this cgroup's memory limit less its usage"
    space = _address_space_left()
    if space is not None and (best is None or space < best):
        best, where = space, "this process's address-space limit (ulimit -v) less its size"
    return best, where


def _address_space_left() -> int | None:
    """What ``RLIMIT_AS`` (``ulimit -v``, a CI runner's cap) leaves above the process's virtual
    size now (``VmSize``): allocations past it fail however much memory the machine has."""
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status", encoding="ascii") as f:
            size_kb = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
        return max(0, soft - size_kb * 1024)
    except (ImportError, OSError, ValueError, StopIteration, IndexError):
        return None


def check_fits(path: str | os.PathLike, kind: str, columns_from: int | None = None) -> None:
    """Raise ``TraceTooLargeError`` when loading ``path`` would need more memory than is available
    (``columns_from``: as for ``estimate``)."""
    path = Path(path)
    try:
        need = estimate(path, kind, columns_from)
    except OSError:
        return                         # the reader says why the file cannot be read
    have, where = available()
    if have is None or need.bytes <= have:
        return
    raise TraceTooLargeError(
        f"{path}: too large for the memory available: loading it needs ~{_gb(need.bytes)} "
        f"({need.how}), and {_gb(have)} is available ({where}); free memory, use a machine with more, or "
        f"set {BUDGET_ENV}=off to load it anyway")


def _gb(n: int) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.1f} MB"


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_left(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """This process's cgroup memory limit (the tightest of its own and the mount's) less its
    usage, the reclaimable file cache not counted as used; None where no limit is set (or none
    can be read). ``root``: the cgroup mount (v2 files there, v1's under ``memory/``)."""
    own = _own_cgroups()
    places = [(root / own.get("v2", ""), "memory.max", "memory.current", "inactive_file"),
              (root, "memory.max", "memory.current", "inactive_file"),
              (root / "memory" / own.get("v1", ""), "memory.limit_in_bytes", "memory.usage_in_bytes",
               "total_inactive_file"),
              (root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")]
    best = None
    for base, limit_name, usage_name, stat_key in places:
        try:
            limit = (base / limit_name).read_text().strip()
            usage = int((base / usage_name).read_text().strip())
        except (OSError, ValueError):
            continue
        if not limit.isdigit() or int(limit) >= 1 << 60:     # "max", or v1's huge number: no limit
            continue
        left = int(limit) - usage + _stat(base / "memory.stat", stat_key)
        best = left if best is None else min(best, left)
    return best


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup paths below the mount: {"v2": ..., "v1": ...} (memory controller)."""
    out = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                out["v2"] = path.strip().lstrip("/")
            elif "memory" in controllers.split(","):
                out["v1"] = path.strip().lstrip("/")
    except (OSError, ValueError):
        pass
    return out


def _stat(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0
