"""May the dashboard open this file? Only traces, within size limits.

The dashboard opens paths typed into a web page, so a path can name any file in the
allowed folders. A file is opened only if its name has a trace suffix, it is not
larger than ``max_bytes``, and it starts like a trace: our ``.trace.jsonl`` with a
photon_trace header line, a PyTorch profiler trace (``.json``) with JSON, an Nsight Systems
export (``.sqlite``) as SQLite (a ``.nsys-rep`` is refused with its export command); a gzip file
must also decompress to at most ``max_decompressed_bytes``, checked by streaming
through it (a gzip bomb is refused, never expanded in memory). Refusals say what is
wrong and never quote the file's bytes: a file that is not a trace is not the
page's business.
"""
from __future__ import annotations

import json
import os
import re
import zlib
from pathlib import Path

from photon_trace.telemetry.trace.file_signs import REPORT_SUFFIXES, SQLITE_MAGIC

OUR_SUFFIXES = (".trace.jsonl", ".trace.jsonl.gz")
NSYS_SUFFIXES = (".sqlite", ".sqlite.gz")
TRACE_SUFFIXES = (*OUR_SUFFIXES, ".pt.trace.json", ".pt.trace.json.gz", *NSYS_SUFFIXES)
"""What the file picker lists: ours, the PyTorch profiler's (``tensorboard_trace_handler``
names its files ``*.pt.trace.json``) and Nsight Systems exports."""
OPENABLE_SUFFIXES = (*OUR_SUFFIXES, ".json", ".json.gz", *NSYS_SUFFIXES)   # a profiler trace under any name opens too
# Bounds on what a typed path may make the server read, not on memory: whether a trace fits
# in memory is checked by the loaders against what the machine has (telemetry/trace/fit.py).
# A 10M-span trace of ours is ~1.1 GB of text; a 10M-event profiler trace ~1 GB of JSON.
MAX_BYTES = 4 * 1024 ** 3                 # on disk
MAX_DECOMPRESSED_BYTES = 16 * 1024 ** 3   # a .gz trace, expanded
MAX_RATIO = 100            # a .gz trace expanding more than this many times its size is a bomb:
_RATIO_FROM = 64 * 1024 ** 2   # ours expand ~5x, a profiler's JSON ~13x (checked past 64 MiB)
_HEADER_BYTES = 64 * 1024                   # the header line must fit in this
_CHUNK = 1024 * 1024
_FORMAT_FIELD = b'"format":"photon_trace"'


RANKS_PREFIX = "ranks:"
"""A job given as files rather than a folder: ``ranks:`` and the paths joined by ``os.pathsep``."""
_RANK_NAME = re.compile(r"rank[-_]?(\d+)", re.I)


def job_files(folder: Path) -> list[Path] | None:
    """The trace files of ``folder`` if they are one distributed job's ranks (two or more, every
    name carrying its own rank number: ``rank0.…pt.trace.json.gz``, ``sampled_rank-1.json.gz``),
    else None: a folder of unrelated traces is a folder to pick from, not a job."""
    try:
        files = sorted(f for f in folder.iterdir() if f.is_file() and f.name.endswith(OPENABLE_SUFFIXES))
    except OSError:
        return None
    ranks = [_RANK_NAME.search(f.name) for f in files]
    if len(files) < 2 or not all(ranks) or len({int(m.group(1)) for m in ranks}) != len(files):
        return None
    return files


def job_spec(paths: list[str | os.PathLike]) -> str:
    """Several files as one job, as the page's dropdown carries it."""
    return RANKS_PREFIX + os.pathsep.join(str(Path(p).expanduser().resolve()) for p in paths)


class NotOpenable(Exception):
    """Why a file may not be opened; the message is safe to show in the page."""


def check_openable(path: Path, *, max_bytes: int = MAX_BYTES,
                   max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES) -> None:
    """Raise ``NotOpenable`` unless ``path`` is a trace file within the limits."""
    name = path.name
    if name.endswith(REPORT_SUFFIXES):
        stem = name.rsplit(".", 1)[0]
        raise NotOpenable(f"{name}: an Nsight Systems report; export it first: "
                          f"nsys export --type sqlite --output {stem}.sqlite {name}")
    if not name.endswith(OPENABLE_SUFFIXES):
        raise NotOpenable(f"{name}: not a trace file (only {', '.join(OPENABLE_SUFFIXES)} files are opened)")
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise NotOpenable(f"{name}: not a regular file")
        if size > max_bytes:
            raise NotOpenable(f"{name}: {size} bytes, larger than the {max_bytes} this dashboard opens")
        with open(path, "rb") as f:
            if name.endswith(".gz"):
                head = _gunzip_checked(f, name, max_decompressed_bytes)
            else:
                head = f.read(_HEADER_BYTES)
    except OSError as e:
        raise NotOpenable(f"{name}: cannot read it ({e.strerror or type(e).__name__})") from None
    if name.endswith(NSYS_SUFFIXES):
        if not head.startswith(SQLITE_MAGIC):
            raise NotOpenable(f"{name}: not an Nsight Systems export (it is not an SQLite database)")
    elif name.endswith(OUR_SUFFIXES):
        if not _is_header(head):
            raise NotOpenable(f"{name}: not a photon_trace trace (its first line is not a trace header)")
    elif not head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
        raise NotOpenable(f"{name}: not a PyTorch profiler trace (it does not start as JSON)")


def _gunzip_checked(f, name: str, limit: int) -> bytes:
    """The first ``_HEADER_BYTES`` of the decompressed stream, after checking all of it fits ``limit``."""
    if f.read(2) != b"\x1f\x8b":
        raise NotOpenable(f"{name}: not gzip data, though the name ends in .gz")
    f.seek(0)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    head, total, read = b"", 0, 0
    try:
        while not d.eof:
            raw = f.read(_CHUNK)
            if not raw:
                break     # cut short: the loader reports what it can read
            read += len(raw)
            data = d.decompress(raw, _CHUNK)
            while True:
                total += len(data)
                if total > limit:
                    raise NotOpenable(f"{name}: decompresses to more than the {limit} bytes this dashboard "
                                      f"opens (a gzip bomb, or a trace too large to draw)")
                if total > _RATIO_FROM and total > MAX_RATIO * read:
                    raise NotOpenable(f"{name}: expands more than {MAX_RATIO} times its size (a gzip bomb; "
                                      f"traces expand 5-15 times)")
                if len(head) < _HEADER_BYTES:
                    head += data[:_HEADER_BYTES - len(head)]
                if not d.unconsumed_tail:
                    break
                data = d.decompress(d.unconsumed_tail, _CHUNK)
    except zlib.error:
        if not head:
            raise NotOpenable(f"{name}: a corrupt gzip stream") from None
    return head


def _is_header(head: bytes) -> bool:
    if not head.startswith(b"{"):
        return False
    if b"\n" not in head:      # a header cut mid-write (the loader says so), or no line at all
        return len(head) < _HEADER_BYTES and _FORMAT_FIELD in head
    try:
        header = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("format") == "photon_trace"
