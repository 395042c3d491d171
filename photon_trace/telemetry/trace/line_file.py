"""A trace file's bytes on disk: lines appended (gzip-framed when the name ends in ``.gz``),
and a clean stop when the disk will take no more.

Each ``write`` reaches the OS before it returns (a crashed run's file reads up to its last
write; gzip output is sync-flushed, so it decompresses that far too). When a write fails
(the disk is full, a quota, an I/O error), a half-written line would read as "cut inside a
line" and the reason would be lost; instead the file is cut back to the end of its last
whole line, and ``stop`` ends it with a line saying where and why it stopped::

    {"stopped": {"why": "the disk is full", "error": "No space left on device", "errno": "ENOSPC", ...}}

(a gzip file gets a fresh deflate block and the member's trailer, so it decompresses whole).
If even that line does not fit, whole lines are given up from the end, one at a time, until
it does, and it counts them (``lines_given_up``); its ``records`` are those of the lines kept
(each ``write`` says how many its lines hold). The loader (``file.py``) reads the line into
the header's ``stopped``.
"""
from __future__ import annotations

import errno
import json
import os
import struct
import zlib
from pathlib import Path

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"   # deflate, no name, no mtime, OS unknown
_KEEP_BOUNDARIES = 16   # whole lines a stop may give up to make room for its own line
WHY = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
       errno.EFBIG: "the file is larger than this system allows", errno.EIO: "an I/O error"}


class WriteStopped(OSError):
    """A trace file could not take a write; it was cut back to its last whole line."""


class LineFile:
    """A trace file open for appending lines."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._gzip = self.path.suffix == ".gz"
        self._deflate = zlib.compressobj(3, zlib.DEFLATED, -zlib.MAX_WBITS) if self._gzip else None
        # (file offset, crc32, uncompressed size, records by kind) after each whole line, newest last
        self._ends: list[tuple[int, int, int, dict[str, int]]] = []
        self.lines = 0
        self.failure: OSError | None = None
        self._floor = -1   # the end of the first line (the header): a stop never gives it up
        if self._gzip:
            self._put(GZIP_HEADER)
        self._ends.append((len(GZIP_HEADER) if self._gzip else 0, 0, 0, {}))

    def write(self, data: bytes, records: dict[str, int] | None = None) -> None:
        """Append whole lines (holding ``records``, by kind); ``WriteStopped`` (the file cut back
        to its last whole line) if the OS refuses them."""
        if self.failure is not None:
            raise WriteStopped(self.failure.errno, self.failure.strerror)
        out = self._deflate.compress(data) + self._deflate.flush(zlib.Z_SYNC_FLUSH) if self._deflate else data
        offset, crc, size, held = self._ends[-1]
        try:
            self._put(out)
        except OSError as e:
            self.failure = e
            self._cut(offset)
            raise WriteStopped(e.errno, f"{self.path.name}: {e.strerror or e} (the file ends at its last whole "
                                        f"line, {self.lines} lines)") from None
        if records:
            held = {k: held.get(k, 0) + records.get(k, 0) for k in {*held, *records}}
        self._ends.append((offset + len(out), zlib.crc32(data, crc), size + len(data), held))
        del self._ends[:-_KEEP_BOUNDARIES]
        if self._floor < 0:
            self._floor = offset + len(out)
        self.lines += data.count(b"\n")

    def stop(self, where: dict | None = None) -> dict:
        """End a file whose write failed with a line saying why, what it holds and ``where`` (the
        caller's words); returns what the line says. Gives up whole lines from the end while
        even that line does not fit."""
        e = self.failure or OSError(errno.EIO, "stopped")
        info = {"why": WHY.get(e.errno, e.strerror or "a write failed"), "error": e.strerror or str(e),
                "errno": errno.errorcode.get(e.errno, str(e.errno)), **(where or {})}
        given_up = 0
        while True:
            offset, crc, size, held = self._ends[-1]
            info.update(lines=self.lines - given_up, records=dict(sorted(held.items())))
            if given_up:
                info["lines_given_up"] = given_up
            line = _stop_line(info)
            try:
                self._cut(offset)
                self._put(self._closing(line, crc, size))
                return info
            except OSError:
                if len(self._ends) == 1 or offset <= self._floor:   # no room even after the header
                    return info
                self._ends.pop()
                given_up += 1

    def close(self) -> None:
        """Close the file: a gzip member gets its final block and trailer (unless stopped: ``stop``
        wrote them)."""
        if self._fd < 0:
            return
        try:
            if self._gzip and self.failure is None:
                _, crc, size, _ = self._ends[-1]
                self._put(self._deflate.flush(zlib.Z_FINISH) + struct.pack("<II", crc, size & 0xFFFFFFFF))
        finally:
            os.close(self._fd)
            self._fd = -1

    def _closing(self, line: bytes, crc: int, size: int) -> bytes:
        """``line`` as the file's last bytes after a cut at a line end (gzip: a fresh deflate
        stream's blocks continue the sync-flushed one, then the trailer of the whole member)."""
        if not self._gzip:
            return line
        z = zlib.compressobj(3, zlib.DEFLATED, -zlib.MAX_WBITS)
        crc, size = zlib.crc32(line, crc), size + len(line)
        return z.compress(line) + z.flush(zlib.Z_FINISH) + struct.pack("<II", crc, size & 0xFFFFFFFF)

    def _cut(self, offset: int) -> None:
        os.ftruncate(self._fd, offset)
        os.lseek(self._fd, offset, os.SEEK_SET)

    def _put(self, data: bytes) -> None:
        """All of ``data`` to the OS (a write may take only part of it)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]


def _stop_line(info: dict) -> bytes:
    return (json.dumps({"stopped": info}, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
