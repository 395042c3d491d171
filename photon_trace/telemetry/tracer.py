"""The tracer interface: the only part of telemetry the engine imports.

The engine calls these methods on its hot path, so the base class is a set of
no-ops and every implementation must keep each call to a tuple append. Device
timestamps arrive already on the host monotonic clock (the backend maps them),
and only at commit, when the step's events are known complete: tracing never
adds a synchronisation.

A host wait on the device calls ``work()`` while the device is busy: a recording
tracer converts and encodes there, in slices of tens of microseconds, in time the
host would otherwise spend spinning (see recording/recorder.py for why not on a thread).
"""
from __future__ import annotations

import time
from enum import IntEnum


class TraceLevel(IntEnum):
    OFF = 0   # nothing recorded; every call is a no-op
    ON = 1    # phases, no-work and serve spans, device ops, waits, steps, request events
    FULL = 2  # also the sub-phases (stage, mask build/upload, stream-out) and per-row detail


class Phase(IntEnum):
    """Host phases of a tick. The first four (the top phases) are recorded at ON, the
    sub-phases (STAGE to STREAM_OUT, each inside a top phase on its thread) at FULL.
    NO_WORK is no phase of a tick: the time the engine had nothing to run (no running or
    waiting request) and its caller waited for a request, recorded at ON. SERVE is none either:
    the server's engine loop between two ticks (handing out a tick's tokens, taking queued
    requests), recorded at ON. New codes come last so that the others keep their meaning in
    older traces."""
    PLAN = 0
    LAUNCH = 1
    COMMIT = 2
    FINALIZE = 3
    STAGE = 4        # writing a step's inputs into the slot's host staging buffers
    MASK_BUILD = 5   # filling constrained rows' allowed-token bitmasks
    MASK_UPLOAD = 6  # enqueueing the mask copy (host side of it)
    STREAM_OUT = 7   # appending tokens, detokenising, handing results to callers
    NO_WORK = 8      # the engine idle, its caller waiting for a request (``Engine.wait_for_work``)
    SERVE = 9        # the server's engine loop between ticks (``server/between_ticks.py``)

    @property
    def span_name(self) -> str:
        """What a trace calls this phase's host spans ("plan", "mask_build"): the one spelling
        that the recorder writes and the analysis, exports and dashboard read."""
        return self.name.lower()

    @property
    def top(self) -> bool:
        """One of the tick's own phases, not a sub-phase inside one."""
        return self < Phase.STAGE

    @property
    def sub(self) -> bool:
        """A sub-phase inside a top phase (recorded at FULL only)."""
        return Phase.STAGE <= self <= Phase.STREAM_OUT


TOP_PHASES = tuple(p.span_name for p in Phase if p.top)
"""The span names of the top phases, in tick order: plan, launch, commit, finalize."""
SUB_PHASES = tuple(p.span_name for p in Phase if p.sub)
"""The span names of the sub-phases (FULL only), each inside a top phase: stage, mask_build, ..."""
NO_WORK = Phase.NO_WORK.span_name
"""The span name of the time the engine had nothing to run ("no_work"): no bubble (see
telemetry/analysis/no_work.py)."""


class DeviceOp(IntEnum):
    PREFILL = 0        # forward over prompt tokens (one chunk)
    FORWARD = 1        # single-token decode forward
    SAMPLE = 2         # sampling of unconstrained rows (enqueued at launch)
    MASKED_SAMPLE = 3  # sampling of constrained rows (enqueued at finalize)
    COPY_BACK = 4      # sampled tokens device -> host (copy stream)
    MASK_UPLOAD = 5    # bitmask host -> device (copy stream)
    STAGE = 6          # staged inputs host -> device (compute stream, before the forward)


class Stream(IntEnum):
    COMPUTE = 0
    COPY = 1


class StepKind(IntEnum):
    DECODE = 0
    PREFILL = 1
    MIXED = 2  # prefill chunks and decode rows in one forward


class RequestEvent(IntEnum):
    ARRIVAL = 0
    ADMITTED = 1
    FIRST_TOKEN = 2
    FINALIZED = 3
    FREED = 4
    ABORTED = 5


def now_ns() -> int:
    """The one clock: host monotonic nanoseconds (shared by every process on the host)."""
    return time.monotonic_ns()


class Tracer:
    """No-op tracer. Subclasses record; the engine never checks which one it has, nor its
    level: it calls every method, and the tracer decides what its level keeps (the
    sub-phases only at FULL, nothing at OFF).
    """

    level: TraceLevel = TraceLevel.OFF

    def begin(self, phase: Phase, step: int, slot: int) -> int:
        """Open a host span; returns its start time (ns). Pushes an NVTX range where enabled."""
        return 0

    def end(self, phase: Phase, step: int, slot: int, t0: int) -> None:
        """Close the span opened by ``begin`` (same phase, step, slot, t0)."""

    def begin_wait(self) -> int:
        """A host wait on the device starts now (call it just before blocking); returns its start
        time (ns), the ``t0`` to pass to ``host_wait``. A recorder notes the waiting thread's
        counters here, to tell later whether the thread ran during the wait."""
        return now_ns()

    def host_wait(self, reason: str, expected: bool, t0: int, t1: int, site: str, step: int) -> None:
        """A host wait on the device: why, whether the design expects it, and its call site (file:line);
        ``t0`` from ``begin_wait`` where the caller could call it (a wait found after the fact has none)."""

    def device_op(self, stream: Stream, op: DeviceOp, step: int, slot: int,
                  t0: int, t1: int, enqueued: int, runq_t0: int = -1, runq_t1: int = -1) -> None:
        """A completed device op, on the host clock; ``enqueued`` is when the host issued it;
        ``runq_t0``/``runq_t1`` the device thread's run-queue counter at its start and end (the
        host-process worker's; -1: not measured)."""

    def device_ops(self, step: int, slot: int, read) -> None:
        """A committed step's device ops: ``read()`` returns them as (stream, op, t0, t1,
        enqueued[, runq_t0, runq_t1]) tuples. Called lazily, only by a tracer that records:
        reading a backend's op times (event queries on CUDA) costs nothing when tracing is off."""
        if self.level:
            for stream, op, *times in read():
                self.device_op(stream, op, step, slot, *times)

    def step(self, step: int, *, kind: StepKind, slot: int, rows: int, zombie_rows: int,
             constrained_rows: int, tokens: int) -> None:
        """One record per committed step; the counts by name (seven ints in a row read alike)."""

    def request(self, req_id: int, event: RequestEvent, t: int, tokens: int = 0) -> None:
        """A request lifecycle event; ``tokens`` carries prompt/output counts where meaningful."""

    def work(self) -> bool:
        """Called repeatedly by a host wait while the device works: do one short slice
        (tens of microseconds) of deferred work and return whether more is pending; the
        wait checks its event between slices and, once this returns False, waits its own
        way. Never blocks, never touches the device. The no-op tracer has none."""
        return False

    def describe(self, **header: object) -> None:
        """Merge run metadata into the trace header (off the hot path, once at start-up):
        ``settings`` (dict), ``model``, ``backend``, ``device`` (dict with ``name``),
        ``clock={"device_error_ns": ...}``. JSON-native values only."""

    def close(self) -> None:
        """Flush and release resources (off the hot path)."""


NULL_TRACER = Tracer()
