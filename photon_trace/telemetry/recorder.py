"""The recording tracer: a tuple append on the engine's hot path; conversion and encoding
in the engine thread's own device waits; I/O on each sink's thread.

Hot path: each call stores one plain tuple into a preallocated ring buffer (a
fixed-size list and a write count): no formatting, dicts, locks or allocation
beyond the tuple. Host spans carry the recording ``threading.Thread``; names are
read when converted. A ring that wraps before it is drained loses its oldest
records, counted per kind in ``dropped`` and in the trace header.

Where the rest runs, and why. Every ``flush_interval_s`` a *flush cycle* drains
the rings, converts the tuples to records (convert.py) and prepares each sink's
chunk: the trace file's JSON line, the OTLP spans and their protobuf encoding.
That is Python work and needs the GIL. On a thread (as before) it stalled the
engine: the engine's spin-wait releases the GIL each turn, the flusher took it
and kept it for the 5 ms switch interval, so the wait ended up to 5 ms late and
the next launch with it. Measured on the tiny preset, 8 streams: device idle
inside flush windows 65% (file) / 27-39% (OTLP every step) against 3-21% /
3-14% outside. A recorder *process* (the other design considered) does not help
where cores are few: with the device worker on one core, a CPU-busy process
beside the engine's host thread raised device idle in its busy windows to
55-65% (SCHED_IDLE) and 24-50% (nice 19) against 4-38% outside, because the
spin-wait's ``sched_yield`` hands the core over just as it handed the GIL. So
the cycle runs *in the engine thread's own waits*: a host wait on the device
calls ``work()`` while the device is busy, and each call runs one slice
(``slice_us``, ~50 us, plus at most one unit of work: a piece of records, one
step's spans) before the wait looks at its event again. The tracer uses time
the host spends waiting anyway, never competes for the GIL, and ends a wait at
most one slice late; in the pipelined loop the next step is already queued on
the device then, so the device does not notice. ``benchmarks/bench_trace_overhead.py``
measures it: device idle inside vs outside flush windows, file and OTLP.

What can block — writing the file, the HTTP POST, a user's sink — never runs in
a wait: each sink has its own thread (sink_port.py) with a bounded queue; a
sink's ``prepare(event, arg)`` (a generator: CPU work in pieces) runs in the
waits, its ``deliver(event, payload)`` on its thread; a plain sink's ``open``/
``write``/``close`` run wholly on its thread. A sink that falls behind drops
chunks and counts them; a sink that raises is detached.

When the engine does not wait (idle between requests, or host-bound), a
fallback thread runs a cycle that has been due for half an interval, one slice
at a time, yielding the GIL and the core between slices.

Closing never hangs: ``close()`` finishes the cycle, closes first the sinks
that do not keep the trace (OTLP, user sinks), writes what they lost into the
trace (``dropped``, e.g. ``{"otlp.spans": 120}``), then closes the trace's own
sinks (file, memory, live); a sink still busy at its deadline is abandoned and
its undelivered records counted. ``close()`` returns within ``close_timeout_s``
plus the CPU time of converting what was still in the rings.

Levels: OFF makes every call the base class's no-op; ON records the four tick
phases, device ops, waits, steps and request events; FULL adds the sub-phases.
With ``nvtx=True`` and an NVTX tool attached, ``begin``/``end`` also push/pop
NVTX ranges. The hot-path calls are meant for the engine's thread and are not
locked; two threads recording into one ring at the same instant can, rarely,
overwrite one record.
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
from threading import current_thread

from photon_trace.telemetry.convert import convert, run_to_end
from photon_trace.telemetry.records import RECORD_KINDS, Trace
from photon_trace.telemetry.sink_port import SinkPort
from photon_trace.telemetry.sinks import Chunk, MemorySink, Sink, merge_header
from photon_trace.telemetry.tracefile import new_header
from photon_trace.telemetry.tracer import DeviceOp, Phase, RequestEvent, StepKind, Stream, Tracer, TraceLevel

log = logging.getLogger(__name__)

_FIRST_FULL_PHASE = int(Phase.STAGE)  # phases from here on are recorded at FULL only
_BUF = {k: ("_" + k, "_" + k + "_n") for k in RECORD_KINDS}  # each ring and its write count


class RecordingTracer(Tracer):
    """Records into ring buffers; sinks receive converted chunks (see the module docstring).

    ``sinks``: objects with ``open(header)``, ``write(chunk)``, ``close()`` (sinks.py).
    ``keep``: also keep every record in memory, for ``snapshot()``.
    ``capacity``: records per ring buffer (rounded up to a power of two).
    ``flush_interval_s``: how often a cycle runs; ``None``: only when ``flush()`` is called.
    ``slice_us``: how long one ``work()`` call may run before it ends at a unit's boundary.
    ``close_timeout_s``: the bound on waiting for sinks at ``close()`` (and ``flush()``).
    ``clock``: a stand-in for ``time.monotonic_ns`` (synthetic runs, tests).
    ``header``: fields merged into the trace header (see ``tracefile.new_header``).
    """

    def __init__(self, level: TraceLevel | int = TraceLevel.ON, *, sinks: tuple[Sink, ...] | list = (),
                 keep: bool = False, capacity: int = 1 << 16, flush_interval_s: float | None = 0.5,
                 slice_us: float = 50.0, close_timeout_s: float = 5.0, nvtx: bool = True, clock=None,
                 header: dict | None = None) -> None:
        self.level = TraceLevel(level)
        self._now = clock or time.monotonic_ns
        if self.level == TraceLevel.OFF:
            capacity = 16  # nothing is recorded
        cap = 1 << max(4, (max(capacity, 2) - 1).bit_length())
        self.capacity = cap
        self._mask = cap - 1
        for buf, n in _BUF.values():
            setattr(self, buf, [None] * cap)
            setattr(self, n, 0)
        self._read = dict.fromkeys(RECORD_KINDS, 0)
        self.dropped = dict.fromkeys(RECORD_KINDS, 0)   # ring wrap-around, per record kind
        self.sink_dropped: dict[str, int] = {}          # what sinks did not get, "<sink>.<unit>"
        self._reported: dict[str, int] = {}             # sink drops already put into a chunk
        self._limit = len(Phase) if self.level >= TraceLevel.FULL else _FIRST_FULL_PHASE

        self.header = new_header(self.level.name.lower(), **(header or {}))
        self._header_lock = threading.Lock()
        self._pending_update: dict = {}
        self._opened = False
        self._ports: list[SinkPort] = []      # live ones
        self._all_ports: list[SinkPort] = []  # detached ones too: their losses still count
        self.sink_errors: list[str] = []
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
            for name in ("begin", "end", "host_wait", "device_op", "step", "request", "work"):
                setattr(self, name, getattr(Tracer, name).__get__(self))
        else:
            from photon_trace.telemetry.nvtx_tracer import NvtxRanges
            self.nvtx = NvtxRanges.create() if nvtx else None
            if self.nvtx is not None:
                self.begin = self._begin_nvtx
                self.end = self._end_nvtx
        if self._memory is not None:
            self._attach(self._memory)
        for s in sinks:
            self._attach(s)
        self._start_fallback()
        ref = weakref.ref(self)
        self._atexit = lambda: (t := ref()) is not None and t.close()
        atexit.register(self._atexit)

    nvtx = None

    # -- hot path ----------------------------------------------------------------------
    def begin(self, phase: Phase, step: int, slot: int) -> int:
        return self._now()

    def end(self, phase: Phase, step: int, slot: int, t0: int) -> None:
        if phase < self._limit:
            i = self._host_spans_n
            self._host_spans[i & self._mask] = (phase, step, slot, t0, self._now(), current_thread())
            self._host_spans_n = i + 1

    def _begin_nvtx(self, phase: Phase, step: int, slot: int) -> int:
        if phase < self._limit:
            self.nvtx.push(phase, step)
        return self._now()

    def _end_nvtx(self, phase: Phase, step: int, slot: int, t0: int) -> None:
        if phase < self._limit:
            t1 = self._now()
            self.nvtx.pop()
            i = self._host_spans_n
            self._host_spans[i & self._mask] = (phase, step, slot, t0, t1, current_thread())
            self._host_spans_n = i + 1

    def host_wait(self, reason: str, expected: bool, t0: int, t1: int, site: str, step: int) -> None:
        i = self._waits_n
        self._waits[i & self._mask] = (reason, expected, t0, t1, site, step)
        self._waits_n = i + 1

    def device_op(self, stream: Stream, op: DeviceOp, step: int, slot: int,
                  t0: int, t1: int, enqueued: int) -> None:
        i = self._device_spans_n
        self._device_spans[i & self._mask] = (stream, op, step, slot, t0, t1, enqueued)
        self._device_spans_n = i + 1

    def step(self, step: int, kind: StepKind, slot: int, rows: int, zombie_rows: int,
             constrained_rows: int, tokens: int) -> None:
        i = self._steps_n
        self._steps[i & self._mask] = (step, kind, slot, rows, zombie_rows, constrained_rows, tokens)
        self._steps_n = i + 1

    def request(self, req_id: int, event: RequestEvent, t: int, tokens: int = 0) -> None:
        i = self._requests_n
        self._requests[i & self._mask] = (req_id, event, t, tokens)
        self._requests_n = i + 1

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
        self._seq += 1
        chunk = Chunk(seq=self._seq)
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
        chunk.dropped.update(self._new_sink_drops())
        for port in list(self._ports):
            if opening is not None:
                yield from self._hand(port, "open", opening)
            yield from self._hand(port, "write", chunk)
        self.flushes += 1
        return chunk

    def _hand(self, port: SinkPort, event: str, arg) -> Generator:
        """Give ``port`` an open/write/close: prepared here (in pieces) if the sink prepares."""
        sink = port.sink
        weight = len(arg) if event == "write" else 0
        if hasattr(sink, "prepare"):
            try:
                arg = yield from sink.prepare(event, arg)
            except Exception as e:
                self._detach(port, event, e)
                return
            weigh = getattr(sink, "weigh", None)
            if weigh is not None and event != "open":
                weight = weigh(arg)
        port.submit(event, arg, weight)

    # -- off the hot path --------------------------------------------------------------
    def describe(self, **header: object) -> None:
        with self._header_lock:
            merge_header(self.header, header)
            if self._opened:
                merge_header(self._pending_update, header)

    def add_sink(self, sink: Sink) -> None:
        """Attach a sink; it is opened with the header at the next cycle (or now, if running)."""
        with self._work_lock:
            port = self._attach(sink)
            with self._header_lock:
                opening = _copy_header(self.header) if self._opened else None
            if opening is not None:
                run_to_end(self._hand(port, "open", opening))
        self._start_fallback()

    @property
    def sinks(self) -> list:
        """The attached sinks (a detached one is gone)."""
        return [p.sink for p in self._ports]

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
        deadline = time.monotonic() + self.close_timeout_s
        for port in list(self._ports):
            port.wait_idle(deadline)
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
        if (self.level != TraceLevel.OFF or self._ports) and self._work_lock.acquire(
                timeout=max(0.0, deadline - time.monotonic())):
            try:
                if self._job is not None:
                    run_to_end(self._job)
                self._job = None
                run_to_end(self._cycle())
            finally:
                self._work_lock.release()
        keepers = [p for p in self._ports if getattr(p.sink, "keeps_trace", False)]
        others = [p for p in self._ports if p not in keepers]
        reserve = min(0.5, self.close_timeout_s / 4)  # for the trace's own sinks, after the others
        self._close_ports(others, deadline - reserve)
        lost = self._new_sink_drops()
        if lost and keepers:
            self._seq += 1
            last = Chunk(seq=self._seq, dropped=lost)
            for port in keepers:
                run_to_end(self._hand(port, "write", last))
        self._close_ports(keepers, deadline)
        self._new_sink_drops()

    # -- internals ---------------------------------------------------------------------
    def _attach(self, sink: Sink) -> SinkPort:
        name, unit = getattr(sink, "drop_key", f"{type(sink).__name__}.records").rsplit(".", 1)
        port = SinkPort(sink, name, unit, _caller(sink), self._port_failed)
        self._ports.append(port)
        self._all_ports.append(port)
        return port

    def _close_ports(self, ports: list[SinkPort], deadline: float) -> None:
        for port in ports:
            run_to_end(self._hand(port, "close", None))
        for port in ports:
            if not port.wait_idle(deadline) and not port.failed:
                lost = port.abandon()
                abort = getattr(port.sink, "abort", None)
                if abort is not None:
                    try:
                        abort()   # e.g. end a hung HTTP request, so the sink's thread ends too
                    except Exception:
                        log.exception("photon_trace: aborting %s failed", type(port.sink).__name__)
                log.warning("photon_trace: %s did not finish within the close timeout (%.1f s); "
                            "gave up on it, %d %s dropped", type(port.sink).__name__, self.close_timeout_s,
                            lost, port.key.rsplit(".", 1)[1])

    def _new_sink_drops(self) -> dict[str, int]:
        """Sink losses (queue overflow, abandoned at close, failed exports) since last asked."""
        total: dict[str, int] = {}
        for port in self._all_ports:
            n = port.dropped + int(getattr(port.sink, "lost", 0) or 0)
            total[port.key] = total.get(port.key, 0) + n
        new = {k: n - self._reported.get(k, 0) for k, n in total.items() if n > self._reported.get(k, 0)}
        self._reported.update({k: total[k] for k in new})
        self.sink_dropped = {k: n for k, n in total.items() if n}
        return new

    def _port_failed(self, port: SinkPort, event: str, exc: BaseException) -> None:
        self._detach(port, event, exc)

    def _detach(self, port: SinkPort, event: str, exc: BaseException) -> None:
        msg = f"{type(port.sink).__name__}.{event} failed: {exc!r}; sink detached"
        log.error("photon_trace: %s", msg, exc_info=exc)
        self.sink_errors.append(msg)
        port.failed = True
        if port in self._ports:
            self._ports.remove(port)

    def _start_fallback(self) -> None:
        if (self._fallback is not None or self._interval_ns is None or self._closed
                or self.level == TraceLevel.OFF or not self._ports):
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

    def _take(self, kind: str) -> tuple[list, int]:
        """The tuples written since the last drain, and how many were lost to wrap-around."""
        buf_name, n_name = _BUF[kind]
        buf = getattr(self, buf_name)
        cap, mask = self.capacity, self._mask
        r, w = self._read[kind], getattr(self, n_name)
        lost = 0
        if w - r > cap:
            lost, r = w - r - cap, w - cap
        a, b = r & mask, w & mask
        if w == r:
            raw = []
        elif a < b:
            raw = buf[a:b]
        else:
            raw = buf[a:] + buf[:b]
        # Slots a writer on another thread reused while we copied hold newer records: discard them.
        overwritten = min(getattr(self, n_name) - cap - r, len(raw))
        if overwritten > 0:
            raw = raw[overwritten:]
            lost += overwritten
        self._read[kind] = w
        return raw, lost


def _caller(sink):
    """What a sink's thread runs for each queued item."""
    if hasattr(sink, "prepare"):
        return sink.deliver

    def call(event: str, arg) -> None:
        if event == "close":
            sink.close()
        else:
            getattr(sink, event)(arg)
    return call


def _copy_header(header: dict) -> dict:
    out: dict = {}
    merge_header(out, header)
    return out


def make_tracer(level: str | TraceLevel | int = "on", *, path=None, trace_dir="traces", otlp=False,
                live=None, keep: bool = False, header: dict | None = None, **kwargs) -> Tracer:
    """The usual setup: ``"off"`` gives the no-op tracer; otherwise a ``RecordingTracer``
    writing ``path`` (default: a new file under ``trace_dir``; ``path=False`` for none),
    exporting over OTLP when ``otlp`` (True, or an ``OtelSink``), feeding ``live`` (a
    ``LiveBuffer``) when given. ``kwargs`` go to ``RecordingTracer``."""
    if isinstance(level, str):
        level = TraceLevel[level.upper()]
    level = TraceLevel(level)
    if level == TraceLevel.OFF:
        from photon_trace.telemetry.tracer import NULL_TRACER
        return NULL_TRACER
    from photon_trace.telemetry.tracefile import TraceFileWriter, default_trace_path

    sinks: list = []
    if path is not False:
        sinks.append(TraceFileWriter(path if path is not None else default_trace_path(trace_dir)))
    if otlp:
        from photon_trace.telemetry.otel import OtelSink
        sinks.append(otlp if isinstance(otlp, OtelSink) else OtelSink())
    if live is not None:
        sinks.append(live)
    return RecordingTracer(level, sinks=sinks, keep=keep, header=header, **kwargs)
