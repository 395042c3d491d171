"""A small profiler trace decoded in one piece, not as a stream of blocks.

The stream (``kineto_scan.py``) finds where each block of events ends with a byte scanner
before decoding it, which bounds the memory of a trace of millions of events; for a trace of a
few megabytes that scan costs half as much as the decoding (0.05 s of the 0.2 s import of
the 8.6 MB hf_qwen h100 sample), and holding all of its events at once is tens of MB. So a
document of at most ``SMALL_BLOCKS`` of the stream's blocks (16 MB decompressed) is decoded
whole, its memory a bounded multiple of the stream's own, when it is one the stream
would read the same way: complete (a gzip stream not cut), valid JSON (msgspec's structs,
else orjson, else the standard library, as the stream decodes each block), an object whose
one ``"traceEvents"`` is its list of events. Then its events are the stream's events and its other keys the
stream's metadata (the keys before the array and after it). Anything else is left to the
stream and its exact account of what is wrong.
"""
from __future__ import annotations

import re
import zlib
from pathlib import Path

try:   # optional: ISA-L's inflate, ~2x faster (0.012 s against 0.027 s for the 9.8 MB ddp sample)
    from isal import isal_zlib as _inflate
except ImportError:   # pragma: no cover - depends on the environment
    _inflate = zlib

from photon_trace.telemetry.trace.importers import kineto_scan
from photon_trace.telemetry.trace.importers.kineto_scan import decode
from photon_trace.telemetry.trace.importers.kineto_structs import decode_events, top_level

SMALL_BLOCKS = 4
"""A document up to this many of the stream's blocks (``kineto_scan.BLOCK`` decompressed bytes
each) is decoded whole: ~5x its size as Python objects while its events are checked, where the
stream holds one block's."""

_OBJECT = re.compile(rb"\s*\{")     # what ``lstrip()[:1] == b"{"`` says, without copying the document


def small_document(path: Path, data: bytes | None, size: int) -> tuple[dict, list] | None:
    """``(metadata, traceEvents)`` of the document at ``path`` (``data``: its bytes, ``size``
    its size on disk) decoded whole, or None: too large, or not a document the stream reads
    the same way (see the module docstring)."""
    limit = SMALL_BLOCKS * kineto_scan.BLOCK
    if size > limit:
        return None
    raw = path.read_bytes() if data is None else data
    if raw.startswith(b"\x1f\x8b"):
        d = _inflate.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = d.decompress(raw, limit + 1)
        except _inflate.error:      # the stream says what is wrong, in zlib's words
            return None
        if not d.eof or len(raw) > limit or d.unused_data:   # cut, too large, or a second member
            return None
    elif len(raw) > limit:
        return None
    if not _OBJECT.match(raw) or raw.count(b'"traceEvents"') != 1:
        return None
    keys = top_level(raw)
    events = decode_events(keys["traceEvents"]) if keys is not None and "traceEvents" in keys else None
    if events is not None:       # the events as structs (kineto_structs.py), the rest as before
        try:
            return {k: decode(bytes(v)) for k, v in keys.items() if k != "traceEvents"}, events
        except (ValueError, RecursionError):
            return None
    try:
        doc = decode(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return None
    events = doc.pop("traceEvents")
    return doc, events
