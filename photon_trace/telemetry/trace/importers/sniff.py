"""``load_any``: one entry point for every trace photon_trace reads.

Our own ``.trace.jsonl[.gz]`` files start with a header line holding ``"format":"photon_trace"``;
an SQLite database (plain or gzipped) is read as an Nsight Systems export; anything else that
starts like JSON is read as a PyTorch profiler (Kineto) trace. A ``.nsys-rep`` is refused with
the command that exports it. Any bad file raises ``TraceFormatError`` (``KinetoFormatError``
and ``NsysFormatError`` are ones) naming the problem.
"""
from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

from photon_trace.telemetry.trace.file import TraceFormatError, load_trace
from photon_trace.telemetry.trace.file_signs import REPORT_SUFFIXES, SQLITE_MAGIC
from photon_trace.telemetry.trace.records import Trace

_HEAD = 4096
_OUR_FORMAT = re.compile(rb'"format"\s*:\s*"photon_trace"')   # our writer is compact; a hand-made header may not be


def _head(path: Path) -> bytes:
    """The first few KB of the file, decompressed when gzipped (as far as that much goes)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(64 * 1024)
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read: {e.strerror or e}") from None
    if raw.startswith(b"\x1f\x8b"):
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, _HEAD)
        except zlib.error as e:
            raise TraceFormatError(f"{path}: a corrupt gzip stream ({e})") from None
    return raw[:_HEAD]




def is_nsys(path: str | os.PathLike) -> bool:
    """Is ``path`` an Nsight Systems report or SQLite export (plain or gzipped)?"""
    head = _head(Path(path))
    # told apart here first: a profiler trace is neither, and need not import the Nsight reader
    # and sqlite3 (1.5 ms of checking a small profile)
    if not str(path).endswith(REPORT_SUFFIXES) and not head.startswith(SQLITE_MAGIC):
        return False
    from photon_trace.telemetry.trace.importers.nsys_read import is_report, looks_like_sqlite
    return is_report(path) or looks_like_sqlite(head)


def is_kineto(path: str | os.PathLike) -> bool:
    """Does ``path`` look like JSON that is not one of our own trace files?

    Ours are JSON lines whose first line is the header object (with
    ``"format": "photon_trace"``, key order and spacing free); a profiler trace is one JSON document
    (its ``traceEvents`` key, if on the first line, tells a compact one apart from our header).
    """
    head = _head(Path(path)).lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    first = head.split(b"\n", 1)[0]
    ours = _OUR_FORMAT.search(first) is not None and b'"traceEvents"' not in first
    return head[:1] in (b"{", b"[") and not ours


def load_any(path: str | os.PathLike, *, strict: bool | None = None, step_annotation: str | None = None) -> Trace:
    """Our trace file or a Kineto trace at ``path``, as a ``Trace``.

    ``strict``: for our files, a partial last line is an error (default: a warning);
    for Kineto traces, any invalid event or truncation is an error (the default; ``False``
    imports what is valid, with warnings). ``step_annotation`` applies to profiler traces and
    Nsight exports.
    """
    path = Path(path)
    if is_nsys(path):
        from photon_trace.telemetry.trace.importers.nsys import import_nsys
        return import_nsys(path, step_annotation=step_annotation)
    if is_kineto(path):
        from photon_trace.telemetry.trace.importers.kineto import import_kineto
        return import_kineto(path, step_annotation=step_annotation, strict=True if strict is None else strict)
    try:
        return load_trace(path, strict=bool(strict))
    except TraceFormatError as e:
        if "not a photon_trace trace" in str(e):   # nor JSON, or it would have been read as a profiler trace
            raise TraceFormatError(f"{e}; nor a PyTorch profiler trace (that is JSON) or an Nsight Systems "
                                   f"export (that is SQLite)") from None
        raise
