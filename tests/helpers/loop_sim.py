"""The one simulator of the engine's tick loop, for traces without an engine.

It drives a real ``RecordingTracer`` on a virtual clock through the calls the engine
makes, in the engine's order (engine/engine.py): each tick plans and launches step
t+1, commits step t, then finalizes step t+1 when pipelined (depth 2); it launches,
finalizes and commits one step when blocking (depth 1). So the trace is what the
recorder writes for such a run. The device has two in-order streams: an op starts at
``max(enqueued + dispatch_ns, its stream free, what it waits for)``; a host wait ends
``wake_ns`` after what it waits for.

As in the engine: a step's ops are enqueued together at the end of launch, constrained
rows' sampling at the end of finalize (their mask upload as it is built); only steps with constrained rows are
finalized; the synchronous (pageable) mask upload is queued on the compute stream,
behind everything there, and the host waits for it; rows whose sequence finished at a
commit not yet run are zombies; a finished sequence leaves the batch at that commit (the
next plan admits from the queue in its place) and is freed at the commit of its last
launched step.

Two parameterisations use it: ``SyntheticRun()`` (a continuous-batching mix: arrivals,
prefill, constrained rows, jitter, per-row host costs) for file, exporter, recorder and
dashboard tests, and ``trace_builder.simulate`` (flat costs, no jitter, everything
derivable by hand) for the analysis tests' exact expectations.

    trace = synthetic_trace(SyntheticRun(steps=60, depth=2))
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.tracer import DeviceOp, Phase, RequestEvent, StepKind, Stream, Tracer, TraceLevel

from helpers.code_sites import COMMIT_SITE, ITEM_SITE, MASK_SYNC_SITE

US = 1_000
MS = 1_000_000
START_NS = 1_000_000_000_000  # virtual clock origin (~17 min of monotonic time)
WALL_ANCHOR_NS = 1_700_000_000_000_000_000  # wall time of START_NS in synthetic headers
# The waits' reasons, as the devices (engine/device/) word them.
MASK_SYNC_REASON = "mask upload: pageable copy waits for the device to drain"
ITEM_REASON = "host read of a device value"


@dataclass(frozen=True)
class LoopCosts:
    """Durations of the modelled loop, in ns; a ``_per_row`` cost is per row of the step
    (constrained rows for the mask build). The defaults are flat: no per-row terms, no
    staging copy (a zero-cost op is left out)."""
    forward_ns: int = 2 * MS
    prefill_ns_per_token: int = 15 * US   # added to the forward per admitted prompt token
    sample_ns: int = 200 * US
    masked_sample_ns: int = 200 * US
    stage_ns: int = 0                     # staged inputs host -> device, before the forward
    copy_ns: int = 30 * US                # copy-back of the sampled tokens
    mask_upload_ns: int = 30 * US
    plan_ns: int = 250 * US
    plan_ns_per_row: int = 0
    launch_ns: int = 150 * US             # launch's own work besides staging
    stage_host_ns_per_row: int = 0
    commit_ns: int = 300 * US             # commit's own work besides streaming out
    stream_out_ns_per_row: int = 0
    finalize_ns: int = 50 * US            # finalize's own work besides building the masks
    mask_build_ns: int = 150 * US
    mask_build_ns_per_row: int = 0
    dispatch_ns: int = 5 * US             # enqueue to earliest start: per-command overhead
    wake_ns: int = 2 * US                 # event to the waiting host running again


BATCHED_COSTS = LoopCosts(
    sample_ns=150 * US, stage_ns=20 * US, mask_upload_ns=25 * US, plan_ns=120 * US, plan_ns_per_row=5 * US,
    launch_ns=210 * US, stage_host_ns_per_row=2 * US, commit_ns=210 * US, stream_out_ns_per_row=10 * US,
    finalize_ns=75 * US, mask_build_ns=0, mask_build_ns_per_row=40 * US)
"""``SyntheticRun``'s costs: host work that grows with the batch."""


@dataclass(frozen=True)
class SyntheticRun:
    steps: int | None = 40          # launched steps; None: until every request is done
    depth: int = 2                  # 2: pipelined, 1: blocking
    streams: int = 4                # requests decoding at once (the engine's rows per step)
    requests: int = 10              # requests in the workload
    prompt_tokens: int = 48         # prefill length of each request
    output_tokens: tuple[int, ...] = (6, 9, 14)   # cycled over requests (in arrival order)
    constrained_every: int = 3      # every n-th request is constrained (0: none, 1: all)
    abort_every: int = 0            # every n-th request is aborted at its first token (0: none)
    arrival_gap_ns: int = 1_500_000
    costs: LoopCosts = BATCHED_COSTS
    jitter: float = 0.1             # each duration is scaled by a uniform factor in 1 +- jitter
    # faults
    mask_upload_bug: bool = False   # the synchronous mask upload: the host waits for the device to drain
    item_sync: bool = False         # a host read of a device value right after commit's wait
    plan_delay_ns: int = 0          # extra host work in plan ...
    plan_delay_steps: frozenset[int] | None = None   # ... at these steps (None: every plan)
    slow_forward_every: int = 0     # every n-th step's decode forward takes ...
    slow_forward_ns: int = 0        # ... this much longer on the device (a device-side fault)
    seed: int = 0
    level: TraceLevel = TraceLevel.FULL

    def __post_init__(self) -> None:
        if self.depth not in (1, 2):
            raise ValueError("depth is 1 (blocking) or 2 (pipelined)")
        if self.steps is not None and self.steps < 1 or self.streams < 1 or self.requests < 1:
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
    launched: int = 0       # steps launched with a row for it
    produced: int = 0
    finalized: bool = False
    inflight: int = 0
    abort: bool = False     # its client goes away once the first token is out


@dataclass
class _Step:
    index: int
    slot: int
    rows: list[_Seq]
    admitted: int
    kind: StepKind
    ops: list[tuple] = field(default_factory=list)   # (stream, op, t0, t1, enqueued)
    copied_at: int = 0

    @property
    def constrained(self) -> int:      # zombies too: their rows are in the forward
        return sum(s.constrained for s in self.rows)


class _Loop:
    def __init__(self, run: SyntheticRun, tracer: Tracer, clock: VirtualClock) -> None:
        self.run, self.c, self.tr, self.clock = run, run.costs, tracer, clock
        self.rng = random.Random(run.seed)
        self.free = {Stream.COMPUTE: 0, Stream.COPY: 0}
        self.waiting: list[_Seq] = []
        self.active: list[_Seq] = []
        every, abort = run.constrained_every, run.abort_every
        self.pending = [
            _Seq(i, clock.t + i * run.arrival_gap_ns, run.output_tokens[i % len(run.output_tokens)],
                 bool(every) and i % every == every - 1, abort=bool(abort) and i % abort == abort - 1)
            for i in range(run.requests)]

    # -- time ----------------------------------------------------------------------------
    def cost(self, ns: int) -> int:
        j = self.run.jitter
        return int(ns * (1 + self.rng.uniform(-j, j))) if j and ns else ns

    def span(self, phase: Phase, step: int, slot: int, ns: int) -> None:
        t0 = self.tr.begin(phase, step, slot)
        self.clock.advance(self.cost(ns))
        self.tr.end(phase, step, slot, t0)

    def issue(self, step: _Step, stream: Stream, op: DeviceOp, ns: int, after: int = 0) -> int:
        """Enqueue ``op`` now; returns when it ends. A zero-cost op is not modelled."""
        if not ns:
            return after
        now = self.clock.t
        t0 = max(now + self.c.dispatch_ns, self.free[stream], after)
        t1 = self.free[stream] = t0 + self.cost(ns)
        step.ops.append((stream, op, t0, t1, now))
        return t1

    def wait(self, until: int, reason: str, expected: bool, site: str, step: int) -> None:
        t0 = self.clock.t
        self.clock.advance(until + self.c.wake_ns - t0)
        self.tr.host_wait(reason, expected, t0, self.clock.t, site, step)

    # -- the tick's parts, as engine/engine.py has them ----------------------------------------
    def decoding(self) -> int:
        """Sequences the scheduler still runs; a finished one keeps its resident seat (the
        engine's ``max_seqs`` has room for it) until its last commit, but no row."""
        return sum(not s.finalized for s in self.active)

    def ready(self) -> bool:
        """Whether a plan now would find a row to run."""
        room = self.decoding() < self.run.streams
        return (self.decoding() > 0
                or room and bool(self.waiting or self.pending and self.pending[0].arrival <= self.clock.t))

    def plan(self, index: int) -> _Step | None:
        r, tr, c = self.run, self.tr, self.c
        t0 = tr.begin(Phase.PLAN, index, -1)
        while self.pending and self.pending[0].arrival <= self.clock.t:
            seq = self.pending.pop(0)
            tr.request(seq.req_id, RequestEvent.ARRIVAL, seq.arrival, r.prompt_tokens)
            self.waiting.append(seq)
        admitted = 0
        while self.waiting and self.decoding() < r.streams:
            seq = self.waiting.pop(0)
            self.active.append(seq)
            admitted += 1
            tr.request(seq.req_id, RequestEvent.ADMITTED, self.clock.t, r.prompt_tokens)
        rows = [s for s in self.active if not s.finalized]  # the scheduler learns of a finish at commit
        delay = r.plan_delay_ns if r.plan_delay_steps is None or index in r.plan_delay_steps else 0
        self.clock.advance(self.cost(c.plan_ns + c.plan_ns_per_row * len(rows)) + delay)
        tr.end(Phase.PLAN, index, -1, t0)
        if not rows:
            return None
        decode = any(s.launched for s in rows)
        kind = (StepKind.MIXED if admitted and decode else StepKind.PREFILL if admitted else StepKind.DECODE)
        for s in rows:
            s.launched += 1
            s.inflight += 1
        return _Step(index, index % 2, rows, admitted, kind)

    def launch(self, index: int) -> _Step | None:
        step = self.plan(index)
        if step is None:
            return None
        c, tr, i, slot = self.c, self.tr, step.index, step.slot
        t0 = tr.begin(Phase.LAUNCH, i, slot)
        self.span(Phase.STAGE, i, slot, c.stage_host_ns_per_row * len(step.rows))
        self.clock.advance(self.cost(c.launch_ns))
        # the flush: the step's commands reach the device together
        self.issue(step, Stream.COMPUTE, DeviceOp.STAGE, c.stage_ns)
        prefill = c.prefill_ns_per_token * self.run.prompt_tokens * step.admitted
        slow = (self.run.slow_forward_ns if self.run.slow_forward_every and not step.admitted
                and i % self.run.slow_forward_every == 0 else 0)
        end = self.issue(step, Stream.COMPUTE, DeviceOp.PREFILL if step.admitted else DeviceOp.FORWARD,
                         c.forward_ns + prefill + slow)
        if step.constrained < len(step.rows):
            end = self.issue(step, Stream.COMPUTE, DeviceOp.SAMPLE, c.sample_ns)
        if not step.constrained:   # nothing to finalize: the step is complete on the device
            step.copied_at = self.issue(step, Stream.COPY, DeviceOp.COPY_BACK, c.copy_ns, after=end)
        tr.end(Phase.LAUNCH, i, slot, t0)
        return step

    def finalize(self, step: _Step) -> None:
        if not step.constrained:
            return
        c, tr, i, slot = self.c, self.tr, step.index, step.slot
        t0 = tr.begin(Phase.FINALIZE, i, slot)
        self.span(Phase.MASK_BUILD, i, slot, c.mask_build_ns + c.mask_build_ns_per_row * step.constrained)
        m0 = tr.begin(Phase.MASK_UPLOAD, i, slot)
        if self.run.mask_upload_bug:   # pageable memory: behind everything on the compute stream
            uploaded = self.issue(step, Stream.COMPUTE, DeviceOp.MASK_UPLOAD, c.mask_upload_ns)
            self.wait(uploaded, MASK_SYNC_REASON, False, MASK_SYNC_SITE, i)
        else:
            uploaded = self.issue(step, Stream.COPY, DeviceOp.MASK_UPLOAD, c.mask_upload_ns)
        tr.end(Phase.MASK_UPLOAD, i, slot, m0)
        self.clock.advance(self.cost(c.finalize_ns))
        end = self.issue(step, Stream.COMPUTE, DeviceOp.MASKED_SAMPLE, c.masked_sample_ns, after=uploaded)
        step.copied_at = self.issue(step, Stream.COPY, DeviceOp.COPY_BACK, c.copy_ns, after=end)
        tr.end(Phase.FINALIZE, i, slot, t0)

    def commit(self, step: _Step) -> None:
        c, tr, i, slot = self.c, self.tr, step.index, step.slot
        t0 = tr.begin(Phase.COMMIT, i, slot)
        self.wait(step.copied_at, "commit: copy-back", True, COMMIT_SITE, i)
        if self.run.item_sync:          # drains the compute stream, the next step's forward included
            self.wait(self.free[Stream.COMPUTE], ITEM_REASON, False, ITEM_SITE, i)
        self.clock.advance(self.cost(c.commit_ns))
        s0 = tr.begin(Phase.STREAM_OUT, i, slot)
        tokens = zombies = 0
        for s in step.rows:
            s.inflight -= 1
            if s.finalized:
                zombies += 1            # launched before its sequence finished: no-op
            else:
                s.produced += 1
                tokens += 1
                if s.produced == 1:
                    tr.request(s.req_id, RequestEvent.FIRST_TOKEN, self.clock.t, 1)
                if s.abort:             # the engine's finish(ABORT): finalized, recorded as aborted
                    s.finalized = True
                    tr.request(s.req_id, RequestEvent.ABORTED, self.clock.t, s.produced)
                elif s.produced >= s.target:
                    s.finalized = True
                    tr.request(s.req_id, RequestEvent.FINALIZED, self.clock.t, s.produced)
            if s.finalized and s.inflight == 0:   # free late: no launched step references it now
                self.active.remove(s)
                tr.request(s.req_id, RequestEvent.FREED, self.clock.t, s.produced)
        self.clock.advance(self.cost(c.stream_out_ns_per_row * len(step.rows)))
        tr.end(Phase.STREAM_OUT, i, slot, s0)
        for stream, op, d0, d1, q in sorted(step.ops, key=lambda o: o[2]):
            tr.device_op(stream, op, i, slot, d0, d1, q)
        tr.step(i, kind=step.kind, slot=slot, rows=len(step.rows), zombie_rows=zombies,
                constrained_rows=step.constrained, tokens=tokens)
        tr.end(Phase.COMMIT, i, slot, t0)

    def run_all(self) -> None:
        inflight: _Step | None = None
        index = 0
        while True:
            more = self.run.steps is None or index < self.run.steps
            if more and inflight is None and not self.ready():
                if not self.pending:
                    break
                self.clock.advance(self.pending[0].arrival - self.clock.t)  # idle until the next arrival
            new = self.launch(index) if more else None
            index += new is not None
            if self.run.depth == 1:
                if new is None:
                    break
                self.finalize(new)
                self.commit(new)
                continue
            if inflight is not None:
                self.commit(inflight)
            if new is not None:
                self.finalize(new)
            elif inflight is None:
                break
            inflight = new


def drive(tracer: Tracer, run: SyntheticRun, clock: VirtualClock) -> None:
    """Make ``tracer`` see ``run``'s calls; ``clock`` must be the tracer's clock."""
    _Loop(run, tracer, clock).run_all()


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
