"""A trace file's lines as a stream: read and inflated a block at a time on a thread of their
own while the loader parses the lines already read.

Inflating a 10M-span file (220 MB of gzip, 1.1 GB of text) takes ~3.5 s of one core, and zlib
lets go of the GIL while it works, so on a machine of two cores it costs the load little when it
runs beside the parsing (whose array operations let go of the GIL too, ``row_scan.py``). Holding
a few blocks at a time instead of the whole text also keeps ~2 GB (the text and its lines) out
of the load's peak.

What it reads is what ``file_errors.py:read_bytes`` reads: the first gzip member (anything after it is
ignored), ``cut`` when the stream ends early, and a corrupt stream reported as such
(``corrupt``) whatever came before it; ``partial_tail`` when the last line has no newline.
Inflated by ISA-L when ``isal`` is installed (its errors are worded its own way: the loader
asks zlib for the words of a corrupt stream's error).
"""
from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

try:   # optional: ISA-L's inflate, the same stream ~2.3x faster (0.08 s against 0.18 s per 112 MB here)
    from isal import isal_zlib as _inflate
except ImportError:   # pragma: no cover - depends on the environment
    _inflate = zlib

READ = 4 << 20      # bytes read from the file at a time
INFLATE = 8 << 20   # decompressed bytes per step
AHEAD = 8           # blocks of lines the reader may be ahead of the parser


class LineStream:
    """Iterate the lines (without their newline) of ``path``, decompressed if it is gzip. After
    the iteration: ``partial_tail``, ``cut``, ``corrupt`` (a ``zlib.error``, or None) and
    ``error`` (an ``OSError`` reading it, or None) say how the stream ended.
    ``threaded=False`` reads on the caller's thread."""

    def __init__(self, path: Path, threaded: bool = True):
        self.path, self.threaded = path, threaded
        self.partial_tail = self.cut = False
        self.corrupt: Exception | None = None
        self.error: OSError | None = None
        self._stop = threading.Event()

    def _blocks(self) -> Iterator[bytes]:
        with open(self.path, "rb") as f:
            data = f.read(READ)
            if not data.startswith(b"\x1f\x8b"):
                while data and not self._stop.is_set():
                    yield data
                    data = f.read(READ)
                return
            d = _inflate.decompressobj(16 + zlib.MAX_WBITS)
            while not self._stop.is_set():
                try:
                    out = d.decompress(data, INFLATE)
                except _inflate.error as e:
                    self.corrupt = e
                    return
                data = d.unconsumed_tail
                if out:
                    yield out
                if d.eof:
                    return
                if not data and len(out) < INFLATE:     # zlib wants more input
                    data = f.read(READ)
                    if not data:
                        self.cut = True
                        return

    def _lines(self) -> Iterator[list[bytes]]:
        """Lists of whole lines; the last list ends with the partial last line, if any."""
        rest = b""
        try:
            for block in self._blocks():
                # split first, then join the partial line to the first piece: the block is copied
                # once (by the split), not twice (``rest + block``, a 10 MB join, then the split)
                lines = block.split(b"\n")
                if rest:
                    lines[0] = rest + lines[0]
                rest = lines.pop()
                if lines:
                    yield lines
        except OSError as e:
            self.error = e
            return
        self.partial_tail = rest != b""
        if self.partial_tail:
            yield [rest]

    def __iter__(self) -> Iterator[bytes]:
        if not self.threaded:
            for lines in self._lines():
                yield from lines
            return
        q: queue.Queue = queue.Queue(AHEAD)

        def work() -> None:
            try:
                for lines in self._lines():
                    q.put(lines)
            finally:
                q.put(None)
        t = threading.Thread(target=work, name="trace-inflate", daemon=True)
        t.start()
        try:
            while (lines := q.get()) is not None:
                yield from lines
        finally:
            self._stop.set()        # the caller stopped early (an error): let the reader end
            while t.is_alive():
                try:
                    q.get(timeout=0.1)
                except queue.Empty:
                    pass
            t.join()


def numbered(head: list[bytes], rest) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line, whether it is the last) for the lines after the header."""
    prev, n = None, 1
    for line in chain(head, rest):
        if prev is not None:
            yield n, prev, False
        prev, n = line, n + 1
    if prev is not None:
        yield n, prev, True
