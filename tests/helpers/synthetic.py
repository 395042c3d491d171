"""A synthetic traced run: a small simulation of the tick loop on a virtual clock.

It drives a real ``RecordingTracer`` through the same calls, in the same order,
as the engine makes them (launch t+1, commit t, finalize t+1 when pipelined;
launch, finalize, commit when blocking), with two in-order device streams, a
continuous-batching request mix (prefill admissions, decode, constrained rows,
zombies) and optionally the mask-upload bug. Tests of the file format, the
exporters, analysis and the dashboard use it for realistic-looking traces
without an engine.

    trace = synthetic_trace(SyntheticRun(steps=60, depth=2))
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from photon_trace.telemetry.records import Trace
from photon_trace.telemetry.recorder import RecordingTracer
from photon_trace.telemetry.tracer import DeviceOp, Phase, RequestEvent, StepKind, Stream, Tracer, TraceLevel

from helpers.code_sites import COMMIT_SITE as SITE_COMMIT, MASK_SYNC_SITE as SITE_MASK_SYNC

START_NS = 1_000_000_000_000  # virtual clock origin (~17 min of monotonic time)
WALL_ANCHOR_NS = 1_700_000_000_000_000_000  # wall time of START_NS in synthetic headers


@dataclass(frozen=True)
class SyntheticRun:
    steps: int = 40                 # launched steps (ticks)
    depth: int = 2                  # 2: pipelined, 1: blocking
    streams: int = 4                # requests decoding at once
    requests: int = 10              # requests in the workload
    prompt_tokens: int = 48         # prefill length of each request
    output_tokens: tuple[int, ...] = (6, 9, 14)   # cycled over requests
    constrained_every: int = 3      # every n-th request is constrained (0: none)
    arrival_gap_ns: int = 1_500_000
    # device costs
    forward_ns: int = 2_000_000
    prefill_ns_per_token: int = 15_000
    sample_ns: int = 150_000
    masked_sample_ns: int = 200_000
    stage_ns: int = 20_000
    copy_ns: int = 30_000
    mask_upload_ns: int = 25_000
    # host costs
    plan_ns: int = 120_000
    launch_ns: int = 180_000
    commit_ns: int = 200_000
    finalize_ns: int = 60_000
    mask_build_ns_per_row: int = 40_000
    stream_out_ns_per_row: int = 10_000
    jitter: float = 0.1
    mask_upload_bug: bool = False   # the synchronous mask upload: host waits for the device to drain
    seed: int = 0
    level: TraceLevel = TraceLevel.FULL

    def __post_init__(self) -> None:
        if self.depth not in (1, 2):
            raise ValueError("depth is 1 (blocking) or 2 (pipelined)")
        if self.steps < 1 or self.streams < 1 or self.requests < 1:
            raise ValueError("steps, streams and requests must be positive")


class VirtualClock:
    """A monotonic ns clock that only moves when told to."""

    def __init__(self, t: int = START_NS) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t

    def advance(self, ns: int) -> None:
        self.t += max(0, int(ns))


@dataclass
class _Seq:
    req_id: int
    arrival: int
    target: int
    constrained: bool
    produced: int = 0
    prefilled: bool = False
    finalized: bool = False
    inflight: int = 0
    freed: bool = False


@dataclass
class _Step:
    index: int
    slot: int
    rows: list[_Seq]
    prefill_rows: list[_Seq]
    kind: StepKind
    ops: list[tuple] = field(default_factory=list)   # (stream, op, t0, t1, enqueued)
    sampled_at: int = 0
    copied_at: int = 0


class _Device:
    """Two in-order streams on the virtual clock; an op starts when issued and its stream is free."""

    def __init__(self) -> None:
        self.free = {Stream.COMPUTE: 0, Stream.COPY: 0}

    def issue(self, step: _Step, stream: Stream, op: DeviceOp, now: int, dur: int, after: int = 0) -> int:
        t0 = max(now, self.free[stream], after)
        t1 = t0 + dur
        self.free[stream] = t1
        step.ops.append((stream, op, t0, t1, now))
        return t1


class _Sim:
    def __init__(self, run: SyntheticRun, tracer: Tracer, clock: VirtualClock) -> None:
        self.run, self.tr, self.clock = run, tracer, clock
        self.rng = random.Random(run.seed)
        self.dev = _Device()
        self.waiting: list[_Seq] = []
        self.active: list[_Seq] = []
        self.pending = [
            _Seq(i, clock.t + i * run.arrival_gap_ns, run.output_tokens[i % len(run.output_tokens)],
                 bool(run.constrained_every) and i % run.constrained_every == run.constrained_every - 1)
            for i in range(run.requests)]

    def cost(self, ns: int) -> int:
        j = self.run.jitter
        return int(ns * (1 + self.rng.uniform(-j, j))) if j else ns

    def host(self, ns: int) -> None:
        self.clock.advance(self.cost(ns))

    def span(self, phase: Phase, step: _Step, ns: int) -> None:
        t0 = self.tr.begin(phase, step.index, step.slot)
        self.host(ns)
        self.tr.end(phase, step.index, step.slot, t0)

    # -- the tick's three parts --------------------------------------------------------
    def launch(self, index: int) -> _Step:
        r, tr, now = self.run, self.tr, self.clock
        slot = index % 2
        t0 = tr.begin(Phase.PLAN, index, -1)
        while self.pending and self.pending[0].arrival <= now.t:
            seq = self.pending.pop(0)
            tr.request(seq.req_id, RequestEvent.ARRIVAL, seq.arrival, r.prompt_tokens)
            self.waiting.append(seq)
        admitted = []
        while self.waiting and len(self.active) < r.streams:
            seq = self.waiting.pop(0)
            self.active.append(seq)
            admitted.append(seq)
            tr.request(seq.req_id, RequestEvent.ADMITTED, now.t, r.prompt_tokens)
        rows = [s for s in self.active if not s.finalized or s in admitted]
        decode = [s for s in rows if s.prefilled]
        kind = (StepKind.MIXED if admitted and decode else
                StepKind.PREFILL if admitted else StepKind.DECODE)
        step = _Step(index, slot, rows, admitted, kind)
        for s in rows:
            s.inflight += 1
        self.host(r.plan_ns + 5_000 * len(rows))
        tr.end(Phase.PLAN, index, -1, t0)

        t0 = tr.begin(Phase.LAUNCH, index, slot)
        self.span(Phase.STAGE, step, 30_000 + 2_000 * len(rows))
        self.dev.issue(step, Stream.COMPUTE, DeviceOp.STAGE, now.t, self.cost(r.stage_ns))
        self.host(r.launch_ns // 2)
        dur = r.forward_ns + r.prefill_ns_per_token * r.prompt_tokens * len(admitted)
        op = DeviceOp.PREFILL if admitted else DeviceOp.FORWARD
        end = self.dev.issue(step, Stream.COMPUTE, op, now.t, self.cost(dur))
        if any(not s.constrained for s in rows):
            self.host(20_000)
            end = self.dev.issue(step, Stream.COMPUTE, DeviceOp.SAMPLE, now.t, self.cost(r.sample_ns))
        step.sampled_at = end
        if not any(s.constrained for s in rows):   # nothing to finalize: complete on the device now
            step.copied_at = self.dev.issue(step, Stream.COPY, DeviceOp.COPY_BACK, now.t,
                                            self.cost(r.copy_ns), after=step.sampled_at)
        self.host(r.launch_ns // 2)
        tr.end(Phase.LAUNCH, index, slot, t0)
        return step

    def finalize(self, step: _Step) -> None:
        r, tr, now = self.run, self.tr, self.clock
        constrained = [s for s in step.rows if s.constrained]  # zombies too: their rows are in the forward
        if not constrained:
            return
        t0 = tr.begin(Phase.FINALIZE, step.index, step.slot)
        self.span(Phase.MASK_BUILD, step, r.mask_build_ns_per_row * len(constrained))
        m0 = tr.begin(Phase.MASK_UPLOAD, step.index, step.slot)
        if r.mask_upload_bug:
            drained = self.dev.free[Stream.COMPUTE]
            w0 = now.t
            now.advance(drained - now.t)
            tr.host_wait("mask upload: drain (sync)", False, w0, now.t, SITE_MASK_SYNC, step.index)
        self.host(15_000)
        up = self.dev.issue(step, Stream.COPY, DeviceOp.MASK_UPLOAD, now.t, self.cost(r.mask_upload_ns))
        tr.end(Phase.MASK_UPLOAD, step.index, step.slot, m0)
        step.sampled_at = self.dev.issue(step, Stream.COMPUTE, DeviceOp.MASKED_SAMPLE, now.t,
                                         self.cost(r.masked_sample_ns), after=up)
        self.host(r.finalize_ns)
        step.copied_at = self.dev.issue(step, Stream.COPY, DeviceOp.COPY_BACK, now.t,
                                        self.cost(r.copy_ns), after=step.sampled_at)
        tr.end(Phase.FINALIZE, step.index, step.slot, t0)

    def commit(self, step: _Step) -> None:
        r, tr, now = self.run, self.tr, self.clock
        t0 = tr.begin(Phase.COMMIT, step.index, step.slot)
        self.host(10_000)
        if step.copied_at > now.t:
            w0 = now.t
            now.advance(step.copied_at - now.t)
            tr.host_wait("commit: copy-back", True, w0, now.t, SITE_COMMIT, step.index)
        for stream, op, d0, d1, q in sorted(step.ops, key=lambda o: o[2]):
            tr.device_op(stream, op, step.index, step.slot, d0, d1, q)
        tokens = zombies = 0
        for s in step.rows:
            s.inflight -= 1
            if s.finalized:
                zombies += 1
                continue
            s.prefilled = True
            s.produced += 1
            tokens += 1
            if s.produced == 1:
                tr.request(s.req_id, RequestEvent.FIRST_TOKEN, now.t, 1)
            if s.produced >= s.target:
                s.finalized = True
                tr.request(s.req_id, RequestEvent.FINALIZED, now.t, s.produced)
        self.host(r.commit_ns)
        self.span(Phase.STREAM_OUT, step, r.stream_out_ns_per_row * max(tokens, 1))
        constrained = sum(1 for s in step.rows if s.constrained)
        tr.step(step.index, step.kind, step.slot, len(step.rows), zombies, constrained, tokens)
        for s in list(self.active):
            if s.finalized and s.inflight == 0:
                s.freed = True
                self.active.remove(s)
                tr.request(s.req_id, RequestEvent.FREED, now.t, s.produced)
        tr.end(Phase.COMMIT, step.index, step.slot, t0)

    def has_work(self) -> bool:
        room = len(self.active) < self.run.streams
        return (any(not s.finalized for s in self.active)
                or room and bool(self.waiting or self.pending and self.pending[0].arrival <= self.clock.t))

    def run_all(self) -> None:
        prev: _Step | None = None
        index = 0
        while index < self.run.steps:
            if not self.has_work():
                if prev is not None:        # drain the pipeline before idling
                    self.commit(prev)
                    prev = None
                    continue
                if not self.pending:
                    break
                self.clock.advance(self.pending[0].arrival - self.clock.t)  # idle until the next arrival
            cur = self.launch(index)
            index += 1
            if self.run.depth == 1:
                self.finalize(cur)
                self.commit(cur)
                continue
            if prev is not None:
                self.commit(prev)
            self.finalize(cur)
            prev = cur
        if prev is not None:
            self.commit(prev)


def drive(tracer: Tracer, run: SyntheticRun, clock: VirtualClock) -> None:
    """Make ``tracer`` see ``run``'s calls; ``clock`` must be the tracer's clock."""
    _Sim(run, tracer, clock).run_all()


def synthetic_tracer(run: SyntheticRun | None = None, *, sinks=(), keep: bool = True,
                     flush_interval_s: float | None = None, thread_name: str = "scheduler",
                     **header) -> RecordingTracer:
    """Record ``run`` through a new ``RecordingTracer`` (virtual clock, given sinks) on a
    thread called ``thread_name``; returns the tracer, flushed but not closed."""
    run = run or SyntheticRun()
    clock = VirtualClock()
    fields = {
        "settings": {"depth": run.depth, "streams": run.streams, "mask_upload_bug": run.mask_upload_bug,
                     "trace": run.level.name.lower()},
        "model": "synthetic-tiny", "backend": "synthetic", "device": {"name": "virtual device"},
        "synthetic": {"seed": run.seed, "steps": run.steps},
        # The wall clock anchored to the virtual monotonic origin, so exports are reproducible.
        "clock": {"mono_ns": START_NS, "wall_ns": WALL_ANCHOR_NS, "wall_error_ns": 0, "device_error_ns": 0},
    }
    fields.update(header)
    tracer = RecordingTracer(run.level, sinks=sinks, keep=keep, flush_interval_s=flush_interval_s,
                             nvtx=False, clock=clock, capacity=1 << 20, header=fields)

    def work() -> None:
        drive(tracer, run, clock)
        tracer.flush()  # while this thread is alive, so its name resolves

    worker = threading.Thread(target=work, name=thread_name)
    worker.start()
    worker.join()
    return tracer


def synthetic_trace(run: SyntheticRun | None = None, **kwargs) -> Trace:
    """A complete ``Trace`` of ``run`` (defaults: 40 pipelined steps, 4 streams, FULL level)."""
    tracer = synthetic_tracer(run, **kwargs)
    trace = tracer.snapshot()
    tracer.close()
    return trace
