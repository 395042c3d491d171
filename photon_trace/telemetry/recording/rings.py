"""The recording tracer's hot path: each call one plain tuple into a preallocated ring.

A ring is a fixed-size list and a write count: no formatting, locks or allocation beyond the
tuple. Host spans carry the recording ``threading.Thread`` (its name is read when
converted). A ring that wraps before it is drained loses its oldest records, counted per kind
in ``dropped`` and in the trace header. ``RecordingTracer`` (recorder.py) drains the rings
(``_take``) in its flush cycles.

Whether the host ran: ``begin``/``end`` and ``begin_wait``/``host_wait`` also read the calling
thread's on-CPU and run-queue counters (thread_clock.py: one ``pread`` of its schedstat file,
kept open, each; the bytes are parsed at conversion) and the record gets their differences
(``cpu_ns``, ``runq_ns``). A begin's reading waits in a dict keyed by its start time until its
end (a wait's by the ``t0`` that ``begin_wait`` returned); a wait recorded without
``begin_wait`` (a sync that CUDA's sync debug mode found) has none: -1.

Levels: OFF makes every call the base class's no-op; ON records the four tick
phases, the engine's no-work spans, the server loop's serve spans, device ops, waits, steps
and request events; FULL adds the sub-phases.
With ``nvtx=True`` and an NVTX tool attached, ``begin``/``end`` also push/pop NVTX
ranges. The hot-path calls are not locked: two threads recording into one ring at
the same instant can, rarely, overwrite one record.
"""
from __future__ import annotations

import time
from threading import current_thread

from photon_trace.telemetry.recording.convert import drain
from photon_trace.telemetry.recording.thread_clock import ThreadClock
from photon_trace.telemetry.trace.records import RECORD_KINDS
from photon_trace.telemetry.tracer import DeviceOp, Phase, RequestEvent, StepKind, Stream, Tracer, TraceLevel

_BUF = {k: ("_" + k, "_" + k + "_n") for k in RECORD_KINDS}  # each ring and its write count
HOT_PATH = ("begin", "end", "begin_wait", "host_wait", "device_op", "step", "request")


class RingTracer(Tracer):
    """The rings and the calls that fill them (module docstring); ``RecordingTracer`` drains them.

    ``capacity``: records per ring buffer (rounded up to a power of two).
    ``clock``: a stand-in for ``time.monotonic_ns`` (synthetic runs, tests); it has no thread
    counters. ``thread_clock`` says where the counters come from, for the trace header.
    """

    nvtx = None

    def __init__(self, level: TraceLevel | int, capacity: int, nvtx: bool, clock) -> None:
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
        # per phase code, whether its spans are kept: all at FULL, all but the sub-phases below it
        self._keeps = tuple(self.level >= TraceLevel.FULL or not p.sub for p in sorted(Phase))
        # the calling thread's counters, unparsed; none on a stand-in clock (a synthetic run's
        # virtual time has nothing to do with the thread's real CPU time)
        clock_of_thread = ThreadClock() if clock is None else None
        self._counters = clock_of_thread.read if clock_of_thread else _no_counters
        self.thread_clock = clock_of_thread.source if clock_of_thread else "none (a stand-in clock)"
        self._began: dict[int, object] = {}        # a span's start time -> its counters then
        self._wait_began: dict[int, object] = {}   # the same for the waits begun
        if self.level == TraceLevel.OFF:
            for name in HOT_PATH:
                setattr(self, name, getattr(Tracer, name).__get__(self))
        else:
            from photon_trace.telemetry.recording.nvtx import NvtxRanges
            self.nvtx = NvtxRanges.create() if nvtx else None
            if self.nvtx is not None:
                self.begin = self._begin_nvtx
                self.end = self._end_nvtx

    def begin(self, phase: Phase, step: int, slot: int) -> int:
        t0 = self._now()
        if self._keeps[phase]:
            self._began[t0] = self._counters()
        return t0

    def end(self, phase: Phase, step: int, slot: int, t0: int) -> None:
        if self._keeps[phase]:
            c1 = self._counters()
            i = self._host_spans_n
            self._host_spans[i & self._mask] = (phase, step, slot, t0, self._now(), current_thread(),
                                                self._began.pop(t0, None), c1)
            self._host_spans_n = i + 1

    def _begin_nvtx(self, phase: Phase, step: int, slot: int) -> int:
        if self._keeps[phase]:
            self.nvtx.push(phase, step)
            t0 = self._now()
            self._began[t0] = self._counters()
            return t0
        return self._now()

    def _end_nvtx(self, phase: Phase, step: int, slot: int, t0: int) -> None:
        if self._keeps[phase]:
            c1 = self._counters()
            t1 = self._now()
            self.nvtx.pop()
            i = self._host_spans_n
            self._host_spans[i & self._mask] = (phase, step, slot, t0, t1, current_thread(),
                                                self._began.pop(t0, None), c1)
            self._host_spans_n = i + 1

    def begin_wait(self) -> int:
        t0 = self._now()
        self._wait_began[t0] = self._counters()
        return t0

    def host_wait(self, reason: str, expected: bool, t0: int, t1: int, site: str, step: int) -> None:
        c0 = self._wait_began.pop(t0, None)
        i = self._waits_n
        self._waits[i & self._mask] = (reason, expected, t0, t1, site, step, c0,
                                       None if c0 is None else self._counters())
        self._waits_n = i + 1

    def device_op(self, stream: Stream, op: DeviceOp, step: int, slot: int,
                  t0: int, t1: int, enqueued: int, runq_t0: int = -1, runq_t1: int = -1) -> None:
        i = self._device_spans_n
        self._device_spans[i & self._mask] = (stream, op, step, slot, t0, t1, enqueued, runq_t0, runq_t1)
        self._device_spans_n = i + 1

    def step(self, step: int, *, kind: StepKind, slot: int, rows: int, zombie_rows: int,
             constrained_rows: int, tokens: int) -> None:
        i = self._steps_n
        self._steps[i & self._mask] = (step, kind, slot, rows, zombie_rows, constrained_rows, tokens)
        self._steps_n = i + 1

    def request(self, req_id: int, event: RequestEvent, t: int, tokens: int = 0) -> None:
        i = self._requests_n
        self._requests[i & self._mask] = (req_id, event, t, tokens)
        self._requests_n = i + 1

    def _take(self, kind: str) -> tuple[list, int]:
        """The tuples written since the last drain, and how many were lost to wrap-around."""
        buf_name, n_name = _BUF[kind]
        raw, lost, self._read[kind] = drain(getattr(self, buf_name), self._read[kind],
                                            lambda: getattr(self, n_name))
        return raw, lost


def _no_counters() -> None:
    return None
