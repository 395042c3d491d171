"""Why a file is not a trace we can read, in words: a foreign file named for what it is, a
header that is cut or mis-shaped, a gzip stream that is corrupt. ``file.py`` raises these;
nothing here reads more than the file's bytes."""
from __future__ import annotations

import io
import zlib
from pathlib import Path

from photon_trace.telemetry.trace.header import FORMAT_NAME
from photon_trace.telemetry.trace.rows import TraceFormatError


def foreign_error(path: Path, head: bytes) -> TraceFormatError:
    what = "unrecognised content"
    if not head.strip():
        what = "it is empty" if not head else "it contains only whitespace"
    elif head.startswith(b"\x89PNG"):
        what = "it is a PNG image"
    elif head.startswith(b"PK\x03\x04"):
        what = "it is a zip archive"
    elif head.startswith(b"%PDF"):
        what = "it is a PDF document"
    elif b"traceEvents" in head[:4096] or head.lstrip().startswith(b"["):
        what = ("it looks like a Chrome/Perfetto trace-event JSON (a PyTorch profiler trace loads "
                "with telemetry.trace.importers.load_any or `photon-trace import`)")
    elif b"\x00" in head[:1024]:
        what = "it is a binary file"
    else:
        what = f"its first line is not a photon_trace header (starts with {head[:60]!r})"
    return TraceFormatError(f"{path}: not a photon_trace trace: {what}")


def read_bytes(path: Path) -> tuple[bytes, bool]:
    """The file's (decompressed) bytes and whether a gzip stream ended early."""
    raw = path.read_bytes()
    if not raw.startswith(b"\x1f\x8b"):
        return raw, False
    out = io.BytesIO()
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out.write(d.decompress(raw))
        cut = not d.eof
    except zlib.error as e:
        if out.tell() == 0:
            raise TraceFormatError(f"{path}: a corrupt gzip stream ({e})") from None
        cut = True
    return out.getvalue(), cut


_HEADER_OBJECTS = ("settings", "clock", "device", "host", "dropped")


def check_header(path: Path, header: dict) -> None:
    """The header fields readers index into have the shape they expect."""
    for key in _HEADER_OBJECTS:
        if header.get(key) is not None and not isinstance(header[key], dict):
            raise TraceFormatError(f"{path}: header field {key!r} must be an object, "
                                   f"got {type(header[key]).__name__}")
    dropped = header.get("dropped") or {}
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in dropped.values()):
        raise TraceFormatError(f"{path}: header field 'dropped' must map record kinds to counts")
    error = (header.get("clock") or {}).get("device_error_ns", 0)
    if not isinstance(error, (int, float)) or isinstance(error, bool):
        raise TraceFormatError(f"{path}: header field clock.device_error_ns must be a number, got {error!r}")


def header_error(path: Path) -> TraceFormatError:
    """Why the first line is not a header, from the whole file (what ``foreign_error`` looks at)."""
    try:
        data, _ = read_bytes(path)
    except OSError as e:
        return TraceFormatError(f"{path}: cannot read: {e}")
    lines = data.split(b"\n")
    partial_tail = lines[-1] != b""
    if not partial_tail:
        lines.pop()
    if len(lines) == 1 and partial_tail and data.startswith(b'{"format":"' + FORMAT_NAME.encode()):
        return TraceFormatError(f"{path}: truncated inside the header line; no records")
    return foreign_error(path, data)
