"""A profiler trace's JSON read as a stream: its metadata whole, its ``traceEvents`` a block at a time.

A trace of ten million events is ~1 GB of JSON; ``json.loads`` of it holds every event as a
dict (~1 KB each): ~10 GB. Here the (gzipped) bytes are decompressed a block at a time, and
the ``traceEvents`` array is cut at its element boundaries by a byte scanner (numpy over the
block: a quote not escaped by a backslash flips "inside a string"; outside strings, brackets
and braces give the depth, and a comma at depth 0 ends an element). Each block of complete
elements is decoded at once (into structs of the fields used when msgspec is installed,
``kineto_structs.py``; else, or where it refuses, orjson when installed, else the standard
library; a block orjson refuses, e.g. ``NaN``, is decoded again by ``json.loads``) and handed
to the caller, who keeps only the fields it uses. The keys around the array (``deviceProperties`` before it,
``baseTimeNanoseconds`` and ``traceName`` after it, as Kineto writes them) are read whole.

What this scanner cannot follow (no ``traceEvents`` array at the top level, JSON broken
before the end) raises ``Unstreamable``; the reader then parses the whole document the old
way when it is small, for that way's exact messages (``kineto_read.py``).
"""
from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from photon_trace.telemetry.trace.importers.kineto_structs import decode_events

try:   # optional: ~3x faster than the standard decoder on event blocks (rows.py uses it too)
    from orjson import loads as _fast_loads
except ImportError:   # pragma: no cover - depends on the environment
    _fast_loads = None

BLOCK = 4 << 20          # decompressed bytes scanned and decoded at once: ~20k events, ~20 MB as dicts
_READ = 1 << 20          # compressed bytes read at once
_KEY = re.compile(rb'"traceEvents"\s*:\s*')

_OPEN = np.zeros(256, dtype=np.int8)
_OPEN[[ord("{"), ord("[")]] = 1
_OPEN[[ord("}"), ord("]")]] = -1
_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[[ord(c) for c in "{}[],"]] = True


class Unstreamable(Exception):
    """The document is not one this scanner reads a block at a time (why: the message)."""


class CorruptGzip(Exception):
    """The gzip stream is damaged (not merely cut short)."""


class Source:
    """Decompressed bytes of a file (or of ``data``), a piece at a time."""

    def __init__(self, path: Path, data: bytes | None):
        self.path, self.data = path, data
        self.cut = False          # a gzip stream that ended before its end marker
        self.total = 0            # decompressed bytes handed out

    def pieces(self) -> Iterator[bytes]:
        f = None
        if self.data is None:
            f = open(self.path, "rb")
        try:
            yield from self._pieces(f)
        finally:
            if f is not None:
                f.close()

    def _raw(self, f) -> Iterator[bytes]:
        if f is None:
            view = memoryview(self.data)
            for i in range(0, len(view), _READ):
                yield bytes(view[i:i + _READ])
            return
        while piece := f.read(_READ):
            yield piece

    def _pieces(self, f) -> Iterator[bytes]:
        raw = self._raw(f)
        first = next(raw, b"")
        if not first.startswith(b"\x1f\x8b"):
            for piece in ([first] if first else []):
                self.total += len(piece)
                yield piece
            for piece in raw:
                self.total += len(piece)
                yield piece
            return
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        for piece in _chain([first], raw):
            while piece:      # a quarter block out at once: a block stays ~BLOCK, whatever the ratio
                try:
                    out = d.decompress(piece, max(BLOCK // 4, 1))
                except zlib.error as e:
                    raise CorruptGzip(str(e)) from None
                if out:
                    self.total += len(out)
                    yield out
                if d.eof:     # a second gzip member (rare) is not read: json.loads of the first never was either
                    return
                piece = d.unconsumed_tail
        rest = d.flush()      # output zlib held back when the last input ran out at the size limit
        if rest:
            self.total += len(rest)
            yield rest
        self.cut = not d.eof


def _chain(*its):
    for it in its:
        yield from it


def decode(block: bytes):
    """A JSON text as Python values: orjson when installed, ``json.loads`` where orjson refuses
    (NaN, invalid UTF-8 read as U+FFFD) so the result is the standard library's, but for an
    integer past 64 bits, which orjson reads as a float (a time that large is refused either way)."""
    if _fast_loads is not None:
        try:
            return _fast_loads(block)
        except ValueError:
            pass
    return json.loads(block.decode("utf-8", errors="replace"))


def element_ends(buf: bytes | bytearray) -> tuple[int, int]:
    """In ``buf`` (array content, starting outside any string at depth 0): the position of the
    last comma ending a complete element (-1: none) and of the array's closing ``]`` (-1: not
    in ``buf``); when the ``]`` is there, the comma is the last one before it."""
    a = np.frombuffer(buf, dtype=np.uint8)
    quotes = np.flatnonzero(a == 34)
    if len(quotes):
        quotes = _unescaped(a, quotes)
    marks = np.flatnonzero(_STRUCTURAL[a])
    marks = marks[(np.searchsorted(quotes, marks) & 1) == 0]      # outside strings
    chars = a[marks]
    depth = np.cumsum(_OPEN[chars], dtype=np.int64)
    closed = np.flatnonzero(depth < 0)
    close = int(marks[closed[0]]) if len(closed) else -1
    commas = (chars == 44) & (depth == 0)
    if close >= 0:
        commas &= marks < close
    found = np.flatnonzero(commas)
    return (int(marks[found[-1]]) if len(found) else -1), close


def _unescaped(a: np.ndarray, quotes: np.ndarray) -> np.ndarray:
    """The quotes not escaped: those after an even run of backslashes (rare: a few per block)."""
    after_backslash = quotes[(quotes > 0) & (a[np.maximum(quotes - 1, 0)] == 92)]
    if not len(after_backslash):
        return quotes
    escaped = []
    for q in after_backslash.tolist():
        n, i = 0, q - 1
        while i >= 0 and a[i] == 92:
            n, i = n + 1, i - 1
        if n % 2:
            escaped.append(q)
    return np.setdiff1d(quotes, np.array(escaped, dtype=quotes.dtype), assume_unique=True) if escaped else quotes


class Stream:
    """The document at ``source`` read as ``meta`` (every top-level key but ``traceEvents``)
    and ``blocks()`` (lists of events, in order). ``truncated`` after ``blocks()`` is done:
    the document ended before its array (or the keys after it) did; ``where``: the byte at
    which its last complete event ended."""

    def __init__(self, source: Source):
        self.source = source
        self.meta: dict = {}
        self.truncated = False
        self.where = 0
        self.n_events = 0
        self.bare = False             # the document is the events array itself
        self._pieces = source.pieces()
        self._consumed = 0            # decompressed bytes before ``buf``

    def _more(self) -> bytes:
        return next(self._pieces, b"")

    def _head(self) -> bytes:
        """Read until the start of the events array; the bytes after its ``[`` are returned."""
        buf = b""
        while True:
            piece = self._more()
            if not piece and not buf.strip():
                raise Unstreamable("empty")
            buf += piece
            start = buf.lstrip()
            if start[:1] == b"[":                         # a bare array of events
                at = len(buf) - len(start) + 1
                self._consumed, self.bare = at, True
                return buf[at:]
            if start[:1] != b"{":
                raise Unstreamable("not an object")
            m = _KEY.search(buf)
            if m is not None and m.end() < len(buf):
                if buf[m.end():m.end() + 1] != b"[":
                    raise Unstreamable("traceEvents is not an array")
                head = buf[:m.start()]
                if _depth_outside_strings(head) != 1:   # a key of a nested object, or inside a string
                    raise Unstreamable("traceEvents not at the top level")
                text = head.rstrip().rstrip(b",") + b"}"
                try:
                    meta = decode(text)
                except ValueError:
                    raise Unstreamable("the keys before traceEvents are not JSON") from None
                if not isinstance(meta, dict):
                    raise Unstreamable("not an object")
                self.meta = meta
                self._consumed = m.end() + 1
                return buf[m.end() + 1:]
            if not piece:
                raise Unstreamable("no traceEvents array")
            if len(buf) > 64 << 20:
                raise Unstreamable("no traceEvents array in the first 64 MB")

    def blocks(self) -> Iterator[list]:
        buf = self._head()
        need = BLOCK
        while True:
            ended = False
            while len(buf) < need:
                piece = self._more()
                if not piece:
                    ended = True
                    break
                buf += piece
            comma, close = element_ends(buf)
            end = close if close >= 0 else comma
            if end < 0:
                need = 2 * len(buf) + BLOCK      # one element longer than a block: read on
            else:
                need = BLOCK
                body = buf[:end]
                if close >= 0 or body.strip():
                    events = self._decode(body)
                    if events:
                        self.n_events += len(events)
                        yield events
                    del events        # not held while the next block is decoded
                self.where = self._consumed + end
                if close >= 0:
                    self._tail(buf[close + 1:])
                    return
                self._consumed += end + 1
                buf = buf[end + 1:]
            if ended:
                last = self._cut(buf)
                if last:
                    yield last
                return

    def _decode(self, body: bytes) -> list:
        text = b"[" + body + b"]"
        typed = decode_events(text)       # the fields read, as structs (kineto_structs.py)
        if typed is not None:
            return typed
        try:
            events = decode(text)
        except RecursionError:
            raise Unstreamable("nested too deeply") from None
        except ValueError:
            raise Unstreamable("an event block is not JSON") from None
        return events

    def _cut(self, rest: bytes) -> list:
        """The input ended inside the array: its last element, if complete, still counts."""
        self.truncated = True
        tail = rest.strip()
        if tail:
            try:
                event = decode(tail)
            except (ValueError, RecursionError):
                return []
            self.n_events += 1
            self.where = self._consumed + len(rest)
            return [event]
        return []

    def _tail(self, rest: bytes) -> None:
        """The keys after the array (Kineto writes baseTimeNanoseconds there)."""
        while piece := self._more():
            rest += piece
            if len(rest) > 64 << 20:
                raise Unstreamable("more than 64 MB after the events")
        text = rest.strip()
        if self.bare:
            if text:
                raise Unstreamable("not JSON after the events")
            return
        if text == b"}":
            return
        if not text:
            self.truncated = True
            return
        if not text.startswith(b","):
            raise Unstreamable("not JSON after the events")
        text = b"{" + text[1:]
        try:
            tail = decode(text)
        except ValueError:
            self.truncated = True
            return
        if isinstance(tail, dict):
            self.meta.update(tail)


def _depth_outside_strings(head: bytes) -> int:
    a = np.frombuffer(head, dtype=np.uint8)
    quotes = np.flatnonzero(a == 34)
    if len(quotes):
        quotes = _unescaped(a, quotes)
        if len(quotes) % 2:
            return -1
    marks = np.flatnonzero(_STRUCTURAL[a])
    marks = marks[(np.searchsorted(quotes, marks) & 1) == 0]
    return int(_OPEN[a[marks]].sum())
