"""The trace file: versioned JSON lines, written while the engine runs (the recorder's sink,
``recording/file_writer.py``) or at once (``write_trace``), and loaded (``load_trace``).

Layout (one JSON object per line, UTF-8; gzip-compressed when the name ends in ``.gz``)::

    {"format": "photon_trace", "version": 2, "settings": {...}, "model": ..., "backend": ...,
     "device": {...}, "host": {...}, "clock": {"wall_ns", "mono_ns", "device_error_ns", ...},
     "photon_trace_version": "...", "trace_level": "on", "created_wall_ns": ...}   <- header
    {"chunk": 1, "host_spans": [[phase, step, slot, t0, t1, thread, cpu_ns, runq_ns], ...], "device_spans": [...],
     "waits": [...], "steps": [...], "requests": [...], "dropped": {"host_spans": 3}}
    {"meta": {...}}        <- header fields set after the header was written (merged on load)
    ...
    {"end": {"records": {"host_spans": n, ...}}}   <- only on a clean close
    {"stopped": {"why": "the disk is full", "error": ..., "records": {...}}}   <- or: a write failed

The header's fields are ``header.py``'s; rows are the fields of the records.py
NamedTuples, in order. A version-1 file's host spans and waits lack the last two fields
(``cpu_ns``, ``runq_ns``): they load as -1, not recorded (``rows.py``). The recorder's writer appends one chunk line per flush (every ~0.5 s) and flushes the file each time, so a
crash loses at most the last flush interval; gzip output is sync-flushed per
chunk so a crashed run's file is readable up to its last chunk. A chunk's
``dropped`` counts records lost to ring wrap-around (by kind) and what other
sinks did not get (``"<sink>.<unit>"``, e.g. ``"otlp.spans"``); on load they
add up in the header's ``dropped``.

Loading policy: a file that is not ours (empty, binary, a Chrome/Perfetto JSON,
another JSON-lines file), a newer format version, a corrupt line before the last
one, or a row of the wrong shape raises ``TraceFormatError`` naming the file,
the line and what was expected. A partial LAST line (the writer was killed
mid-write) and a missing end line (crashed or still running) are tolerated:
the records before it load, a ``TraceTruncatedWarning`` is issued for the
partial line, and the header says ``"truncated": true`` / ``"incomplete": true``.
``load_trace(path, strict=True)`` turns a partial last line into an error. A file whose
writer could write no more (a full disk: ``line_file.py``) ends with a stopped line
instead of the end line: the records before it load, and the header's ``stopped`` says
where and why (with ``"incomplete": true``). Impossible times are errors (``plausible.py``).
"""
from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Generator
from contextlib import closing
from pathlib import Path

from photon_trace.telemetry.trace.file_errors import check_header, header_error, read_bytes
from photon_trace.telemetry.trace.fit import check_fits
from photon_trace.telemetry.trace.header import FORMAT_NAME, FORMAT_VERSION, add_dropped, merge_header
from photon_trace.telemetry.trace.line_file import LineFile, WriteStopped
from photon_trace.telemetry.trace.line_read import LineStream, numbered
from photon_trace.telemetry.trace.pieces import PIECE, run_to_end
from photon_trace.telemetry.trace.plausible import RULE, check_trace
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk, Trace
from photon_trace.telemetry.trace.row_columns import ColumnsBuilder
from photon_trace.telemetry.trace import row_scan_compiled
from photon_trace.telemetry.trace.row_scan import scan_chunk
from photon_trace.telemetry.trace.scan_ahead import scanned_ahead
from photon_trace.telemetry.trace.rows import (OLDER_WIDTH, ROW_TYPES, TraceFormatError, check_columns, check_rows, gc_paused,
                                               json_line)

class TraceTruncatedWarning(UserWarning):
    """The file ends in a partial line (the writer stopped mid-write); the rest loaded."""


def default_trace_path(directory: str | os.PathLike = "traces", stem: str = "run",
                       compress: bool = False) -> Path:
    """``traces/<stem>-YYYYmmdd-HHMMSS-<pid>.trace.jsonl[.gz]`` (the directory is created)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return d / f"{stem}-{stamp}-{os.getpid()}.trace.jsonl{'.gz' if compress else ''}"


# -- writing -----------------------------------------------------------------------------

def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def encode_line(obj: object) -> bytes:
    """One line of the file (the header, a meta or an end line)."""
    return (_dumps(obj) + "\n").encode()


def end_line(counts: dict[str, int]) -> bytes:
    """The last line of a cleanly closed file: the records written, by kind."""
    return encode_line({"end": {"records": counts}})


def chunk_lines(chunk: Chunk) -> Generator[None, None, tuple[bytes, dict] | None]:
    """A chunk's lines as bytes (a meta line for its header fields, then its chunk line, if it
    has records or drops) and the records they hold by kind; None when there is nothing to
    write. JSON-encoded ``PIECE`` rows at a time (yields between pieces)."""
    out = [encode_line({"meta": chunk.header})] if chunk.header else []
    counts = {}
    if len(chunk) or any(chunk.dropped.values()):
        parts = ['{"chunk":%d' % chunk.seq]
        for kind in RECORD_KINDS:
            rows = getattr(chunk, kind)
            if rows:
                pieces = []
                for i in range(0, len(rows), PIECE):
                    piece = rows[i:i + PIECE]     # a list, or Columns (an import's): tuples built here
                    pieces.append(_dumps(piece if isinstance(piece, list) else list(piece))[1:-1])
                    yield
                parts.append(f',"{kind}":[{",".join(pieces)}]')
                counts[kind] = len(rows)
        if any(chunk.dropped.values()):
            parts.append(',"dropped":' + _dumps({k: n for k, n in chunk.dropped.items() if n}))
        parts.append("}\n")
        out.append("".join(parts).encode())
    return (b"".join(out), counts) if out else None


def write_trace(trace: Trace, path: str | os.PathLike, chunk_rows: int = 4096) -> Path:
    """Write a complete ``Trace`` (header as is, records in chunks of ``chunk_rows``)."""
    header = dict(trace.header)
    header.setdefault("format", FORMAT_NAME)
    header["version"] = FORMAT_VERSION    # the rows are written in this version's shape
    out = LineFile(path)
    written = dict.fromkeys(RECORD_KINDS, 0)
    try:
        out.write(encode_line(header))
        seq = 0
        longest = max((len(getattr(trace, k)) for k in RECORD_KINDS), default=0)
        for lo in range(0, max(longest, 1), chunk_rows):
            seq += 1
            chunk = Chunk(seq=seq, **{k: getattr(trace, k)[lo:lo + chunk_rows] for k in RECORD_KINDS})
            lines = run_to_end(chunk_lines(chunk))
            if lines is not None:
                out.write(*lines)
                for kind, n in lines[1].items():
                    written[kind] += n
        out.write(end_line(written))
    except WriteStopped:
        out.stop()    # the file says where it stopped and why
        raise
    finally:
        out.close()
    return Path(path)


# -- loading -----------------------------------------------------------------------------

COLUMNS_FROM = 1 << 20
"""Files of this many bytes of text (~6k spans) and more load every kind of record as ``Columns``
(~50 bytes a record instead of ~750 as tuples in a list), so the analysis's ``column()`` and
``codes()`` read arrays built once instead of building them from tuples at each call; a 200k-span
file's ``check`` took 10.4 s as lists, 8.5 s as columns. Smaller ones (test fixtures, short runs) load
as lists, which code may edit in place and iterate without building tuples; there the time is the same."""


def _add_columns(builder: ColumnsBuilder, path: Path, lineno: int, kind: str, rows: list) -> None:
    try:
        builder.add(check_columns(path, lineno, kind, rows))
    except OverflowError:
        raise TraceFormatError(f"{path}: line {lineno}: a {kind} row holds a number outside int64: no clock gives "
                               f"that time ({RULE})") from None


def load_trace(path: str | os.PathLike, strict: bool = False) -> Trace:
    """Read a trace file (plain or gzip), validating format, version and structure.

    Raises ``TraceFormatError`` for foreign, corrupt or too-new files; see the
    module docstring for how partial and unfinished files are handled."""
    with gc_paused():   # millions of acyclic lists and records: collection passes only slow it (rows.py)
        return _load(Path(path), strict)


def _load(path: Path, strict: bool) -> Trace:
    check_fits(path, "ours", COLUMNS_FROM)   # refused up front when it cannot fit in memory (fit.py)
    stream = LineStream(path)
    lines = iter(stream)
    try:
        trace = _load_lines(path, strict, stream, lines)
    except TraceFormatError:
        for _ in lines:    # the file's error is the stream's when it is corrupt or unreadable, as
            pass           # when the whole file was read before any line was parsed
        _stream_error(path, stream)
        raise
    _stream_error(path, stream)
    return trace


def _stream_error(path: Path, stream: LineStream) -> None:
    if stream.error is not None:
        raise TraceFormatError(f"{path}: cannot read: {stream.error}")
    if stream.corrupt is not None:
        read_bytes(path)     # zlib's own words for what is wrong (the stream may be ISA-L's)
        raise TraceFormatError(f"{path}: a corrupt gzip stream ({stream.corrupt})")


SCAN_FROM = 64 << 10
"""Chunk lines of this many bytes and more, in a file loaded as columns, are read by
``row_scan.py`` (array operations); shorter ones by the JSON parser, which is quicker for them."""
_SCAN_TYPES = {k: t for k, (_, t) in ROW_TYPES.items()}


def _scannable(raw: bytes) -> bool:
    return len(raw) >= SCAN_FROM and raw.startswith(b'{"chunk":')


def _scan(path: Path, lineno: int, raw: bytes) -> tuple[dict, dict] | None:
    """A chunk line as (its object without the row sections, those rows as columns), or None: the
    caller parses the line (``row_scan.py`` reads only what it can prove plain). The compiled
    scanner first, where it is installed (``row_scan_compiled.py``), then numpy's."""
    got = (row_scan_compiled.scan_chunk(raw, _SCAN_TYPES, OLDER_WIDTH)
           or scan_chunk(raw, _SCAN_TYPES, OLDER_WIDTH))
    if got is None:
        return None
    rest, found = got
    try:
        obj = json_line(path, lineno, rest)
    except ValueError:      # TraceFormatError too: the whole line is parsed again, for its error
        return None
    if not isinstance(obj, dict) or any(k in obj for k in found):
        return None
    return obj, found


def _load_lines(path: Path, strict: bool, stream: LineStream, lines) -> Trace:
    head, size = [], 0
    for line in lines:     # a large file's records load as columns: how large is known by here
        head.append(line)
        size += len(line) + 1
        if size > COLUMNS_FROM:
            break
    else:
        size -= stream.partial_tail
    if not head or not head[0].strip():
        raise header_error(path)
    try:
        header = json_line(path, 1, head[0])
    except TraceFormatError:
        raise
    except ValueError:
        raise header_error(path) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise header_error(path)
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise TraceFormatError(f"{path}: header has no integer format version (got {version!r})")
    if version > FORMAT_VERSION:
        raise TraceFormatError(
            f"{path}: format version {version} is newer than this photon_trace reads "
            f"({FORMAT_VERSION}); upgrade photon_trace")
    if version < 1:
        raise TraceFormatError(f"{path}: unknown format version {version}")
    check_header(path, header)

    trace = Trace(header=header)
    # a large file's records as columns (row_columns.py), its long chunk lines read as arrays
    columnar = {k: ColumnsBuilder(*ROW_TYPES[k]) for k in ROW_TYPES} if size >= COLUMNS_FROM else {}
    numbered_lines = numbered(head[1:], lines)
    with closing(scanned_ahead(numbered_lines, lambda n, raw: _scan(path, n, raw), _scannable) if columnar
                 else ((n, raw, last, None) for n, raw, last in numbered_lines)) as read:
        return _load_records(path, strict, stream, trace, columnar, read)


def _load_records(path: Path, strict: bool, stream: LineStream, trace: Trace, columnar: dict, read) -> Trace:
    ended = False
    truncated = False
    for lineno, raw, last, scanned in read:
        if last:
            _stream_error(path, stream)   # a corrupt or unreadable stream says so before any cut line
        found = {}
        if scanned is not None:
            obj, found = scanned
        else:
            try:
                obj = json_line(path, lineno, raw)
            except TraceFormatError:
                raise
            except ValueError as e:
                if last and (stream.partial_tail or stream.cut):
                    if strict:
                        raise TraceFormatError(f"{path}: line {lineno}: truncated (partial last line)") from None
                    warnings.warn(f"{path}: line {lineno} is a partial line (the writer stopped "
                                  f"mid-write); loaded the {lineno - 2} lines before it",
                                  TraceTruncatedWarning, stacklevel=4)   # the caller of load_trace
                    truncated = True
                    break
                raise TraceFormatError(f"{path}: line {lineno}: not valid JSON ({e})") from None
        if not isinstance(obj, dict):
            raise TraceFormatError(f"{path}: line {lineno}: expected a JSON object, got {type(obj).__name__}")
        if ended:
            raise TraceFormatError(f"{path}: line {lineno}: records after the end line")
        if "chunk" in obj:
            for kind, rows in found.items():
                if rows:
                    columnar[kind].add_scanned(rows)
            for kind, rows in obj.items():
                if kind == "chunk":
                    continue
                if kind == "dropped":
                    if not isinstance(rows, dict) or not all(isinstance(v, int) for v in rows.values()):
                        raise TraceFormatError(f"{path}: line {lineno}: 'dropped' must map kinds to counts")
                    add_dropped(trace.header, rows)
                    continue
                if kind not in ROW_TYPES:
                    raise TraceFormatError(f"{path}: line {lineno}: unknown record kind {kind!r}")
                if not isinstance(rows, list):
                    raise TraceFormatError(f"{path}: line {lineno}: {kind} must be a list of rows")
                if kind in columnar:
                    _add_columns(columnar[kind], path, lineno, kind, rows)
                else:
                    getattr(trace, kind).extend(check_rows(path, lineno, kind, rows))
        elif "meta" in obj:
            if not isinstance(obj["meta"], dict):
                raise TraceFormatError(f"{path}: line {lineno}: 'meta' must be an object")
            merge_header(trace.header, obj["meta"])
        elif "end" in obj:
            ended = True
        elif "stopped" in obj:
            if not isinstance(obj["stopped"], dict):
                raise TraceFormatError(f"{path}: line {lineno}: 'stopped' must be an object")
            trace.header["stopped"] = obj["stopped"]
            ended = True       # nothing may follow it; the trace is still incomplete (below)
        else:
            raise TraceFormatError(f"{path}: line {lineno}: unknown line (keys {sorted(obj)[:5]})")
    gzip_cut = stream.cut
    if gzip_cut and not truncated:
        if strict:
            raise TraceFormatError(f"{path}: the gzip stream is cut short")
        if not ended:
            warnings.warn(f"{path}: the gzip stream is cut short; loaded what was there",
                          TraceTruncatedWarning, stacklevel=4)   # the caller of load_trace
            truncated = True
    for kind, builder in columnar.items():
        setattr(trace, kind, builder.finish())
    check_header(path, trace.header)   # again: meta lines merge into it
    check_trace(trace, str(path))       # impossible times are bad input, not data (plausible.py)
    if truncated:
        trace.header["truncated"] = True
    if not ended or "stopped" in trace.header:
        trace.header["incomplete"] = True
    return trace
