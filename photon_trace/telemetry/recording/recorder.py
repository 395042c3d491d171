"""The recording tracer: a tuple append on the engine's hot path; conversion and encoding
in the engine thread's own device waits; I/O on each sink's own thread.

Hot path: each call stores one plain tuple into a preallocated ring buffer (rings.py: the
rings, the calls, whether the host ran, the levels; this class is a ``RingTracer``).

Where the rest runs, and why. Every ``flush_interval_s`` a *cycle* drains the
rings, converts the tuples (convert.py) and prepares each sink's chunk (the trace
file's JSON line, the OTLP spans and their encoding): Python work, under the GIL.
On a flusher thread it stalled the engine: the engine's spin-wait releases the GIL
each turn, the flusher took it and kept it for the 5 ms switch interval, so waits
ended late and the next launch with them. A recorder *process* does not help where
cores are few: beside the engine's host thread, a CPU-busy process took the core
at each ``sched_yield`` of the spin-wait just as the thread took the GIL (tiny
preset, 8 streams, device worker on the other core: device idle 55-65% inside its
busy windows against 4-38% outside). So the cycle runs in the engine thread's own
waits: a host wait on the device calls ``work()`` while the device is busy, and
each call runs one slice (``slice_us``, 50 us, ending at a unit's boundary: a
piece of records, one step's spans, a few spans' encoding), then the wait looks at
its event again. The recorder uses time the host spends waiting anyway, never
competes for the GIL, and ends a wait at most a unit late, when the next step is
already queued on the device in the pipelined loop. (Its CPU still counts: on a
core shared with other jobs, the OS runs a thread that spent more CPU later; OTLP
with every step exported, ~0.1 s of CPU per second, shows as later waits there.)
``benchmarks/bench_trace_overhead.py`` measures it (device idle inside vs outside
flush windows, and how late waits end with and without the recorder's work; the
README quotes it).

What can block (writing the file, an HTTP POST, a user's sink) never runs in a
wait: each sink has its own thread and a bounded queue (sink_port.py, sink_set.py);
a sink's ``prepare`` runs in the waits and its ``deliver`` on its thread (sinks.py).
When the engine does not wait (idle, or host-bound), a fallback thread runs a cycle
that has been due for half an interval, yielding the GIL and the core between slices:
beside a busy engine it gets about one slice per GIL switch interval (5 ms), so work
the engine leaves no time for backs up and is dropped at the rings, counted, rather
than taken out of the engine.

Closing never hangs: ``close()`` finishes the cycle, then closes the sinks within
``close_timeout_s`` (sink_set.py: a stuck sink is abandoned and what it lost is
written into the trace's ``dropped``). It returns within ``close_timeout_s`` plus
the CPU time of converting what was still in the rings.
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Generator

from photon_trace.telemetry.recording.convert import convert
from photon_trace.telemetry.recording.rings import RingTracer
from photon_trace.telemetry.recording.sink_port import SinkPort
from photon_trace.telemetry.recording.sink_set import SinkSet
from photon_trace.telemetry.recording.sinks import MemorySink, Sink
from photon_trace.telemetry.trace.header import merge_header, new_header
from photon_trace.telemetry.trace.pieces import run_to_end
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk, Trace
from photon_trace.telemetry.tracer import Tracer, TraceLevel

log = logging.getLogger(__name__)


class RecordingTracer(RingTracer):
    """Records into ring buffers; sinks receive converted chunks (see the module docstring).

    ``sinks``: objects with ``open(header)``, ``write(chunk)``, ``close()`` (sinks.py).
    ``keep``: also keep every record in memory, for ``snapshot()``.
    ``capacity``: records per ring buffer (rounded up to a power of two).
    ``flush_interval_s``: how often a cycle runs; ``None``: only when ``flush()`` is called.
    ``slice_us``: how long one ``work()`` call may run before it ends at a unit's boundary.
    ``close_timeout_s``: the bound on waiting for sinks at ``close()`` (and ``flush()``).
    ``clock``: a stand-in for ``time.monotonic_ns`` (synthetic runs, tests).
    ``header``: fields merged into the trace header (see ``trace.header.new_header``).
    """

    def __init__(self, level: TraceLevel | int = TraceLevel.ON, *, sinks: tuple[Sink, ...] | list = (),
                 keep: bool = False, capacity: int = 1 << 16, flush_interval_s: float | None = 0.5,
                 slice_us: float = 50.0, close_timeout_s: float = 5.0, nvtx: bool = True, clock=None,
                 header: dict | None = None) -> None:
        super().__init__(level, capacity, nvtx, clock)   # the rings and the hot path (rings.py)
        self.header = new_header(self.level.name.lower(), **(header or {}))
        self.header["host"]["thread_clock"] = self.thread_clock
        self._header_lock = threading.Lock()
        self._pending_update: dict = {}
        self._opened = False
        self._sinks = SinkSet()
        self._memory = MemorySink() if keep else None
        self._seq = 0
        self._closed = False
        self.close_timeout_s = close_timeout_s

        # the flush cycle, advanced a slice at a time by whoever holds _work_lock
        self._work_lock = threading.Lock()
        self._job: Generator | None = None
        self._job_t0 = self._touched_ns = 0
        self._interval_ns = None if flush_interval_s is None else int(flush_interval_s * 1e9)
        self._due_ns = time.monotonic_ns() + (self._interval_ns or 0)
        self._slice_ns = int(slice_us * 1e3)
        self._stop = threading.Event()
        self._fallback: threading.Thread | None = None
        self.flushes = 0
        self.flush_ns = 0          # all time spent in cycles (conversion, preparing sinks' chunks)
        self.wait_work_ns = 0      # the part done inside the engine's device waits
        self.windows: deque[tuple[int, int]] = deque(maxlen=4096)  # (t0, t1) of each cycle, monotonic ns

        if self.level == TraceLevel.OFF:
            self.work = Tracer.work.__get__(self)
        if self._memory is not None:
            self._sinks.attach(self._memory)
        for s in sinks:
            self._sinks.attach(s)
        self._start_fallback()
        ref = weakref.ref(self)
        self._atexit = lambda: (t := ref()) is not None and t.close()
        atexit.register(self._atexit)

    # -- in the engine's device waits ---------------------------------------------------
    def work(self) -> bool:
        if self._job is None and (self._interval_ns is None or time.monotonic_ns() < self._due_ns
                                  or self._closed):
            return False                    # the common case: nothing due, ~0.2 us
        if not self._work_lock.acquire(blocking=False):
            return False                    # the fallback thread or a flush() has it
        try:
            return self._slice(in_wait=True)
        finally:
            self._work_lock.release()

    def _slice(self, in_wait: bool) -> bool:
        """Advance the cycle (starting one if none runs) for about one slice; True if it goes on."""
        t0 = time.monotonic_ns()
        if self._job is None:
            self._job, self._job_t0 = self._cycle(), t0
            self._due_ns = t0 + (self._interval_ns or 0)
        end = t0 + self._slice_ns
        job, done = self._job, False
        try:
            while True:
                next(job)
                if time.monotonic_ns() >= end:
                    break
        except StopIteration:
            done = True
        except Exception:  # a bad record must not end tracing: this cycle's chunk is lost
            log.exception("photon_trace: trace flush failed")
            done = True
        t1 = self._touched_ns = time.monotonic_ns()
        self.flush_ns += t1 - t0
        if in_wait:
            self.wait_work_ns += t1 - t0
        if done:
            self._job = None
            self.windows.append((self._job_t0, t1))
        return not done

    def _cycle(self) -> Generator[None, None, Chunk]:
        """One flush: drain the rings, convert, hand each sink its chunk (prepared in pieces)."""
        chunk = Chunk(seq=self._next_seq())
        for began in (self._began, self._wait_began):
            if len(began) > 256:    # begun and never ended (a phase that raised): keep the dict small
                began.clear()
        taken = [(kind, *self._take(kind)) for kind in RECORD_KINDS]  # one cut, before converting
        yield
        for kind, raw, lost in taken:
            chunk.dropped[kind] = lost
            self.dropped[kind] += lost
            setattr(chunk, kind, (yield from convert(kind, raw)))
        with self._header_lock:
            opening = None
            if not self._opened:
                self._opened = True
                opening = _copy_header(self.header)
            elif self._pending_update:
                chunk.header, self._pending_update = self._pending_update, {}
        chunk.dropped.update(self._sinks.new_drops())
        yield from self._sinks.hand_all(chunk, opening)
        self.flushes += 1
        return chunk

    # -- off the hot path --------------------------------------------------------------
    def describe(self, **header: object) -> None:
        with self._header_lock:
            merge_header(self.header, header)
            if self._opened:
                merge_header(self._pending_update, header)

    def add_sink(self, sink: Sink) -> None:
        """Attach a sink; it is opened with the header at the next cycle (or now, if running)."""
        with self._work_lock:
            port = self._sinks.attach(sink)
            with self._header_lock:
                opening = _copy_header(self.header) if self._opened else None
            if opening is not None:
                run_to_end(self._sinks.hand(port, "open", opening))
        self._start_fallback()

    @property
    def sinks(self) -> list:
        """The attached sinks (a detached one is gone)."""
        return [p.sink for p in self._sinks.ports]

    @property
    def sink_ports(self) -> list[SinkPort]:
        """Every sink's port, detached ones included (delivery times, losses)."""
        return list(self._sinks.all_ports)

    @property
    def sink_errors(self) -> list[str]:
        """Why each detached sink was detached."""
        return self._sinks.errors

    @property
    def sink_dropped(self) -> dict[str, int]:
        """What sinks did not get, by ``"<sink>.<unit>"`` (the trace header's ``dropped`` has them too)."""
        return self._sinks.dropped

    def flush(self) -> Chunk:
        """Run a whole cycle now (after finishing one in progress) and wait, up to
        ``close_timeout_s``, for every sink to take it; returns its chunk."""
        with self._work_lock:
            t0 = time.monotonic_ns()
            if self._job is not None:
                run_to_end(self._job)
            self._job = None
            chunk = run_to_end(self._cycle())
            t1 = time.monotonic_ns()
            self.flush_ns += t1 - t0
            self.windows.append((t0, t1))
            self._due_ns = t1 + (self._interval_ns or 0)
        self._sinks.wait_idle(time.monotonic() + self.close_timeout_s)
        return chunk

    def snapshot(self) -> Trace:
        """Everything recorded so far as a ``Trace`` (needs ``keep=True``); flushes first."""
        if self._memory is None:
            raise RuntimeError("snapshot() needs RecordingTracer(keep=True)")
        if not self._closed:
            self.flush()
        return self._memory.trace()

    def close(self) -> None:
        """Flush what is left and close every sink, within ``close_timeout_s`` (module
        docstring). Idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._atexit)
        deadline = time.monotonic() + self.close_timeout_s
        self._stop.set()
        if self._fallback is not None and self._fallback is not threading.current_thread():
            self._fallback.join(max(0.0, deadline - time.monotonic()))
        if (self.level != TraceLevel.OFF or self._sinks.ports) and self._work_lock.acquire(
                timeout=max(0.0, deadline - time.monotonic())):
            try:
                if self._job is not None:
                    run_to_end(self._job)
                self._job = None
                run_to_end(self._cycle())
            finally:
                self._work_lock.release()
        self._sinks.close(deadline, min(0.5, self.close_timeout_s / 4), self._next_seq)

    # -- internals ---------------------------------------------------------------------
    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _start_fallback(self) -> None:
        if (self._fallback is not None or self._interval_ns is None or self._closed
                or self.level == TraceLevel.OFF or not self._sinks.ports):
            return
        ref = weakref.ref(self)
        stop, poll = self._stop, self._interval_ns / 2e9

        def run() -> None:
            while not stop.wait(poll):
                tracer = ref()
                if tracer is None:
                    return
                try:
                    tracer._catch_up()
                except Exception:  # keep going; a bad record must not end the thread
                    log.exception("photon_trace: trace flush failed")
                del tracer

        self._fallback = threading.Thread(target=run, name="photon-trace-flush", daemon=True)
        self._fallback.start()

    def _catch_up(self) -> None:
        """Run a cycle the engine's waits have not: the engine is idle, or never waits."""
        late = time.monotonic_ns() - self._interval_ns // 2
        if (self._due_ns if self._job is None else self._touched_ns) > late:
            return   # not due yet, or the engine's waits are on it
        while not self._stop.is_set():
            with self._work_lock:
                more = self._slice(in_wait=False)
            if not more:
                return
            os.sched_yield()  # the GIL and the core go back to the engine between slices



def _copy_header(header: dict) -> dict:
    out: dict = {}
    merge_header(out, header)
    return out
