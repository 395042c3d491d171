"""The host-process device's command queue: each flush's batch, pickled, in a shared-memory ring.

Through a socket, each batch cost the host a write syscall and the worker a read syscall and
the connection's framing: a launch cost the host 4.3 us (one command) and a step enqueued while
the worker waited started 16-19 us later. Through this ring: 2.3 us and 8-9 us
(``benchmarks/bench_command_send.py`` and the traces' late starts, same session). A step queued
early is still read ~20 us after the previous step's copy-back: right after a forward that read
pays for the interpreter's cold caches more than for the transport. The pipe only rings a bell
for a worker that went to sleep (``Doorbell``).

One writer (the host), one reader (the worker). A record is a length word and the
pickled batch, padded to 8 bytes; ``head`` and ``tail`` count the bytes written and
read since the start, so the free room is ``size - (head - tail)``. A record that does
not fit before the end is preceded by a wrap word; one too big for the ring travels on
the socket, announced by an empty record (``ON_SOCKET``) at its place in the order.
The writer stores the record before it moves ``head``, and the reader reads it before
it moves ``tail``: on x86 stores are seen in order, as the device's event counters
already rely on.
"""
from __future__ import annotations

import os
import select

import numpy as np

import photon_trace.engine.device.shm as _shm

_WRAP = -1          # length word: the rest of the ring is unused, the record is at its start
ON_SOCKET = 0       # length word: this batch travels on the socket (too big for the ring)
_HEADER = 16        # head, tail
RING_BYTES = 1 << 20


def _padded(n: int) -> int:
    return 8 + ((n + 7) & ~7)


class CommandRing:
    def __init__(self, nbytes: int | None = None, path: str | None = None) -> None:
        if path is None:
            self.path, self._map = _shm.create(_HEADER + (nbytes or RING_BYTES))
        else:
            self.path, self._map = path, _shm.attach(path)
        self.size = (len(self._map) - _HEADER) & ~7
        self._count = np.frombuffer(self._map, dtype=np.int64, count=2)      # head, tail
        self._words = np.frombuffer(self._map, dtype=np.int64, count=self.size // 8, offset=_HEADER)
        self._bytes = memoryview(self._map)[_HEADER:_HEADER + self.size]
        self._next = 0      # the reader's tail after the record it holds

    def fits(self, n: int) -> bool:
        """Whether a record of ``n`` bytes goes in the ring (else on the socket)."""
        return _padded(n) <= self.size // 4

    def put(self, data: bytes) -> bool:
        """The writer: append one record; False while the reader has not made room for it."""
        need = _padded(len(data))
        head, tail = int(self._count[0]), int(self._count[1])
        pos = head % self.size
        skip = self.size - pos if self.size - pos < need else 0
        if head + skip + need - tail > self.size:
            return False
        if skip:
            self._words[pos // 8] = _WRAP
            head, pos = head + skip, 0
        self._bytes[pos + 8:pos + 8 + len(data)] = data
        self._words[pos // 8] = len(data)
        self._count[0] = head + need
        return True

    def get(self) -> memoryview | None:
        """The reader: the oldest record (valid until ``advance``), None when there is none."""
        tail = int(self._count[1])
        if tail == int(self._count[0]):
            return None
        pos = tail % self.size
        n = int(self._words[pos // 8])
        if n == _WRAP:
            tail += self.size - pos
            pos, n = 0, int(self._words[0])
        self._next = tail + _padded(n)
        return self._bytes[pos + 8:pos + 8 + n]

    def advance(self) -> None:
        """The reader is done with the record ``get`` returned: its room is the writer's again."""
        self._count[1] = self._next

    def close(self) -> None:
        self._bytes.release()
        self._count = self._words = None


class Doorbell:
    """Wakes a worker asleep until the next batch: a pipe the host writes a byte to per batch.

    The writer never blocks: a full pipe already holds a byte the worker will read. The
    worker empties it before it sleeps and looks at the batch count once more, so a batch
    sent before the emptying is seen then and one sent after it rings again.
    """

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)

    def ring(self) -> None:
        try:
            os.write(self.write_fd, b"\0")
        except BlockingIOError:
            pass

    def handed_over(self) -> None:
        """The worker holds the read end now: the host's copy goes (a worker gone then makes
        ``ring`` fail instead of filling a pipe nobody reads)."""
        self._close_read()

    def close(self) -> None:
        self._close_read()
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def _close_read(self) -> None:
        # each end is closed once: its number may belong to another file right after
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1


def empty_bell(fd: int) -> bool:
    """The worker: read every byte waiting on the doorbell; False when the host has gone."""
    try:
        while True:
            if not os.read(fd, 4096):
                return False
    except BlockingIOError:
        return True


def sleep_on_bell(fd: int) -> None:
    select.select([fd], [], [])
