"""What a recorder hands its consumers: the sink protocol, and the two in-memory sinks.

A ``RecordingTracer`` drains its ring buffers every flush interval into a
``Chunk`` (``trace/records.py``) and hands it to each attached sink. Every sink has
its own delivery thread (sink_port.py): its calls never run on the engine's hot
path nor in its device waits, and a sink that blocks holds up only itself. This
module holds the two in-memory sinks; the trace file writer is in
``file_writer.py`` and the OpenTelemetry exporter in ``export/otlp/sink.py``.
"""
from __future__ import annotations

import copy
import threading
from collections import deque
from typing import Protocol

from photon_trace.telemetry.trace.header import add_dropped, merge_header
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk, Trace


class Sink(Protocol):
    """A consumer of drained records: ``open``, then ``write`` per chunk, then ``close``,
    in that order on the sink's own thread. Its work holds the engine's GIL while it
    runs, so a sink should be cheap in CPU; heavy work belongs in ``prepare``.

    Optional attributes and methods:

    * ``prepare(event, arg)`` and ``deliver(event, payload)``: a sink with CPU work
      (encoding) splits it: ``prepare`` is a generator that does the CPU part in small
      pieces (``yield`` between them, tens of microseconds apart) and returns a payload;
      it runs in the engine's device waits, so it must never block. ``deliver`` gets the
      payload on the sink's thread and does the I/O. ``event`` is ``"open"`` (arg: the
      header), ``"write"`` (a chunk) or ``"close"`` (None). Such a sink's ``open``/
      ``write``/``close`` are not called by the recorder.
    * ``weigh(payload)``: the payload's size in the sink's unit, for loss counts.
    * ``drop_key``: how its losses are named in the trace header's ``dropped``,
      ``"<sink>.<unit>"`` (default ``"<class>.records"``).
    * ``keeps_trace``: True for sinks that hold the trace itself (file, memory, live):
      closed last, after the losses of the others were written into them.
    * ``lost``: what the sink itself failed to deliver (e.g. exports that failed), in its unit.
    * ``abort()``: called on a sink given up on at close (e.g. end a hung request).
    """

    def open(self, header: dict) -> None: ...
    def write(self, chunk: Chunk) -> None: ...
    def close(self) -> None: ...


def extend_trace(trace: Trace, chunk: Chunk) -> None:
    """Append a chunk's records (and header changes, drop counts) to ``trace``."""
    for kind in RECORD_KINDS:
        getattr(trace, kind).extend(getattr(chunk, kind))
    if chunk.header:
        merge_header(trace.header, chunk.header)
    add_dropped(trace.header, chunk.dropped)


class MemorySink:
    """Keeps every record in memory; ``trace()`` returns what has been flushed so far.

    For tests, benchmarks and short runs: memory grows with the run."""

    keeps_trace = True
    drop_key = "memory.records"

    def __init__(self) -> None:
        self._trace = Trace(header={})
        self._lock = threading.Lock()

    def open(self, header: dict) -> None:
        with self._lock:
            self._trace.header = copy.deepcopy(header)

    def write(self, chunk: Chunk) -> None:
        with self._lock:
            extend_trace(self._trace, chunk)

    def close(self) -> None:
        pass

    def trace(self) -> Trace:
        """A copy (new lists, same immutable records) safe to use while recording continues."""
        with self._lock:
            t = self._trace
            return Trace(copy.deepcopy(t.header), *(list(getattr(t, k)) for k in RECORD_KINDS))


class LiveBuffer:
    """The last ``max_chunks`` chunks, for a server's live endpoint.

    ``recent(cursor)`` returns the records of every chunk after ``cursor`` as a
    ``Trace`` and the cursor to pass next time; start with cursor 0 (a cursor
    that goes backwards means a new run: start over from 0). When the
    reader fell behind and chunks were evicted, ``header["live"]["missed_chunks"]``
    says how many it missed.
    """

    keeps_trace = True
    drop_key = "live.records"

    def __init__(self, max_chunks: int = 240) -> None:
        self._chunks: deque[Chunk] = deque(maxlen=max_chunks)
        self._header: dict = {}
        self._last_seq = 0
        self._lock = threading.Lock()

    def open(self, header: dict) -> None:
        with self._lock:
            self._header = copy.deepcopy(header)

    def write(self, chunk: Chunk) -> None:
        with self._lock:
            if chunk.header:
                merge_header(self._header, chunk.header)
            add_dropped(self._header, chunk.dropped)
            self._chunks.append(chunk)
            self._last_seq = chunk.seq

    def close(self) -> None:
        pass

    def recent(self, cursor: int = 0) -> tuple[Trace, int]:
        with self._lock:
            chunks = [c for c in self._chunks if c.seq > cursor]
            header = copy.deepcopy(self._header)
            last = self._last_seq
        first_held = chunks[0].seq if chunks else last + 1
        header["live"] = {"cursor": cursor, "missed_chunks": max(0, first_held - cursor - 1)}
        out = Trace(header)
        for c in chunks:
            for kind in RECORD_KINDS:
                getattr(out, kind).extend(getattr(c, kind))
        # A cursor past the last chunk came from another run (the server restarted): answering
        # with this run's own, smaller cursor lets the reader see that and start over.
        return out, last
