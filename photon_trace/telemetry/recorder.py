"""The recording tracer: near-free on the engine's hot path, everything else off it.

Hot path: each call stores one plain tuple into a preallocated ring buffer (a
fixed-size list and a write count) — no formatting, dicts, locks or
allocation beyond the tuple. Enum arguments are stored as given and host
spans carry the recording ``threading.Thread`` (``current_thread()``, ~40 ns
more than ``get_ident()`` but its name survives the thread); names are read
when the chunk is converted.

Off the hot path: a background flusher thread (every ``flush_interval_s``,
0.5 s by default) drains the buffers, converts the tuples to records.py types
and hands a ``Chunk`` to each sink (trace file, OTLP, live buffer, memory).
A buffer that wraps before a flush loses its oldest records; the loss is
counted per kind (``dropped``) and reaches the sinks and the trace header.

Levels: OFF makes every call the base class's no-op; ON records the four tick
phases, device ops, waits, steps and request events; FULL adds the sub-phases
(stage, mask build, mask upload, stream-out). With ``nvtx=True`` and an NVTX
tool attached (Nsight Systems), ``begin``/``end`` also push/pop NVTX ranges.

The hot-path calls are meant for the engine's threads and are not locked:
two threads recording into the same buffer at the same instant can, rarely,
overwrite one record. The engine records from its scheduler thread.
"""
from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from threading import current_thread

from photon_trace.telemetry.records import (RECORD_KINDS, DeviceSpan, HostSpan, HostWait, RequestRecord, StepRecord,
                                            Trace)
from photon_trace.telemetry.sinks import Chunk, MemorySink, Sink, merge_header
from photon_trace.telemetry.tracefile import new_header
from photon_trace.telemetry.tracer import DeviceOp, Phase, RequestEvent, StepKind, Stream, Tracer, TraceLevel

log = logging.getLogger(__name__)

_PHASE = [p.name.lower() for p in sorted(Phase)]
_STREAM = [s.name.lower() for s in sorted(Stream)]
_OP = [o.name.lower() for o in sorted(DeviceOp)]
_KIND = [k.name.lower() for k in sorted(StepKind)]
_EVENT = [e.name.lower() for e in sorted(RequestEvent)]
_FIRST_FULL_PHASE = int(Phase.STAGE)  # phases from here on are recorded at FULL only

# attribute names of each ring buffer and its write count
_BUF = {k: ("_" + k, "_" + k + "_n") for k in RECORD_KINDS}


class RecordingTracer(Tracer):
    """Records into ring buffers; sinks receive converted chunks on a flusher thread.

    ``sinks``: objects with ``open(header)``, ``write(chunk)``, ``close()``.
    ``keep``: also keep every record in memory, for ``snapshot()``.
    ``capacity``: records per ring buffer (rounded up to a power of two).
    ``flush_interval_s``: ``None`` starts no flusher thread (call ``flush()`` yourself).
    ``clock``: a stand-in for ``time.monotonic_ns`` (synthetic runs, tests).
    ``header``: fields merged into the trace header (see ``tracefile.new_header``).
    """

    def __init__(self, level: TraceLevel | int = TraceLevel.ON, *, sinks: tuple[Sink, ...] | list = (),
                 keep: bool = False, capacity: int = 1 << 16, flush_interval_s: float | None = 0.5,
                 nvtx: bool = True, clock=None, header: dict | None = None) -> None:
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
        self.dropped = dict.fromkeys(RECORD_KINDS, 0)
        self._limit = len(Phase) if self.level >= TraceLevel.FULL else _FIRST_FULL_PHASE

        self.header = new_header(self.level.name.lower(), **(header or {}))
        self._header_lock = threading.Lock()
        self._pending_update: dict = {}
        self._opened = False
        self._sinks: list[Sink] = []
        self.sink_errors: list[str] = []
        self._memory = MemorySink() if keep else None
        self._flush_lock = threading.Lock()
        self._seq = 0
        self._closed = False
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._flush_interval_s = flush_interval_s
        self.flushes = 0
        self.flush_ns = 0   # total time spent in flush(): conversion and sinks, off the hot path

        if self.level == TraceLevel.OFF:
            for name in ("begin", "end", "host_wait", "device_op", "step", "request"):
                setattr(self, name, getattr(Tracer, name).__get__(self))
        else:
            from photon_trace.telemetry.nvtx_tracer import NvtxRanges
            self.nvtx = NvtxRanges.create() if nvtx else None
            if self.nvtx is not None:
                self.begin = self._begin_nvtx
                self.end = self._end_nvtx
        if self._memory is not None:
            self._sinks.append(self._memory)
        for s in sinks:
            self.add_sink(s)
        self._start_flusher()
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

    # -- off the hot path --------------------------------------------------------------
    def describe(self, **header: object) -> None:
        with self._header_lock:
            merge_header(self.header, header)
            if self._opened:
                merge_header(self._pending_update, header)

    def add_sink(self, sink: Sink) -> None:
        """Attach a sink; it is opened with the header at the next flush (or now, if running)."""
        with self._flush_lock:
            if self._opened:
                with self._header_lock:
                    header = _copy_header(self.header)
                self._call(sink, "open", header)
            self._sinks.append(sink)
        self._start_flusher()

    def flush(self) -> Chunk:
        """Drain the ring buffers, convert, and hand the chunk to every sink; returns the chunk."""
        with self._flush_lock:
            start = time.perf_counter_ns()
            chunk = self._drain()
            with self._header_lock:
                if not self._opened:
                    self._opened = True
                    opening = _copy_header(self.header)
                else:
                    opening = None
                    if self._pending_update:
                        chunk.header, self._pending_update = self._pending_update, {}
            for sink in list(self._sinks):
                if opening is not None:
                    self._call(sink, "open", opening)
                self._call(sink, "write", chunk)
            self.flushes += 1
            self.flush_ns += time.perf_counter_ns() - start
            return chunk

    def snapshot(self) -> Trace:
        """Everything recorded so far as a ``Trace`` (needs ``keep=True``); flushes first."""
        if self._memory is None:
            raise RuntimeError("snapshot() needs RecordingTracer(keep=True)")
        if not self._closed:
            self.flush()
        return self._memory.trace()

    def close(self) -> None:
        """Stop the flusher, flush what is left and close every sink. Idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._atexit)
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join()
        if self.level != TraceLevel.OFF or self._sinks:
            self.flush()
        with self._flush_lock:
            for sink in list(self._sinks):
                self._call(sink, "close")

    # -- internals ---------------------------------------------------------------------
    def _start_flusher(self) -> None:
        if (self._flusher is not None or self._flush_interval_s is None or self._closed
                or self.level == TraceLevel.OFF or not self._sinks):
            return
        ref = weakref.ref(self)
        stop, interval = self._stop, self._flush_interval_s

        def run() -> None:
            while not stop.wait(interval):
                tracer = ref()
                if tracer is None:
                    return
                try:
                    tracer.flush()
                except Exception:  # keep flushing; a bad record must not end the thread
                    log.exception("photon_trace: trace flush failed")
                del tracer

        self._flusher = threading.Thread(target=run, name="photon-trace-flush", daemon=True)
        self._flusher.start()

    def _call(self, sink: Sink, method: str, arg=None) -> None:
        try:
            getattr(sink, method)() if arg is None else getattr(sink, method)(arg)
        except Exception as e:  # a failing sink is detached; the engine keeps running
            msg = f"{type(sink).__name__}.{method} failed: {e!r}; sink detached"
            log.exception("photon_trace: %s", msg)
            self.sink_errors.append(msg)
            if sink in self._sinks:
                self._sinks.remove(sink)

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
        # Slots the writer reused while we copied hold newer records: discard them.
        overwritten = min(getattr(self, n_name) - cap - r, len(raw))
        if overwritten > 0:
            raw = raw[overwritten:]
            lost += overwritten
        self._read[kind] = w
        return raw, lost

    def _drain(self) -> Chunk:
        self._seq += 1
        chunk = Chunk(seq=self._seq)
        raw, lost = self._take("host_spans")
        chunk.dropped["host_spans"] = lost
        chunk.host_spans = [HostSpan(_PHASE[p], int(s), int(sl), int(t0), int(t1), th.name)
                            for p, s, sl, t0, t1, th in raw]
        raw, chunk.dropped["device_spans"] = self._take("device_spans")
        chunk.device_spans = [DeviceSpan(_STREAM[st], _OP[op], int(s), int(sl), int(t0), int(t1), int(q))
                              for st, op, s, sl, t0, t1, q in raw]
        raw, chunk.dropped["waits"] = self._take("waits")
        chunk.waits = [HostWait(str(r), bool(x), int(t0), int(t1), str(site), int(s))
                       for r, x, t0, t1, site, s in raw]
        raw, chunk.dropped["steps"] = self._take("steps")
        chunk.steps = [StepRecord(int(s), _KIND[k], int(sl), int(r), int(z), int(c), int(n))
                       for s, k, sl, r, z, c, n in raw]
        raw, chunk.dropped["requests"] = self._take("requests")
        chunk.requests = [RequestRecord(int(q), _EVENT[e], int(t), int(n)) for q, e, t, n in raw]
        for kind, n in chunk.dropped.items():
            self.dropped[kind] += n
        return chunk


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
