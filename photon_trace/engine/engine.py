"""The engine: requests in, tokens out, one pipelined tick at a time.

Each tick launches step t+1, commits step t, then finalizes step t+1:
"forward now, sample later". Depth 1 runs the same three phases on one step
in series (launch, finalize, commit): the blocking loop, everything else equal.
"""
from __future__ import annotations

import random
import secrets
from dataclasses import replace
from collections.abc import Callable, Iterator, Sequence as Seq

import numpy as np

from photon_trace.telemetry.tracer import NULL_TRACER, Phase, Tracer, now_ns
from photon_trace.engine.constraints.interface import bitmask_words
from photon_trace.engine.device import make_device
from photon_trace.engine.device.base import NUM_SLOTS, DeviceError, DeviceSpec
from photon_trace.engine.device.staging import SlotShape
from photon_trace.engine.engine_config import EngineConfig
from photon_trace.engine.pages import PageAllocator
from photon_trace.engine.outputs import EngineStats, RequestDelta, RequestOutput
from photon_trace.engine.params import MAX_TOP_LOGPROBS, SamplingParams
from photon_trace.engine.request_book import RequestBook
from photon_trace.engine.scheduler import Scheduler, StepPlan
from photon_trace.engine.sequence import FinishReason
from photon_trace.engine.stage import fill_masks, launch_shape, read_logprob, sampling_mode, stage_plan


class Engine:
    def __init__(self, config: EngineConfig | None = None, tracer: Tracer = NULL_TRACER, **overrides) -> None:
        from photon_trace.engine.model.host_side import load_host_side

        config = config or EngineConfig(**overrides)
        host = load_host_side(config.model)
        self.model_config, self.tokenizer = host.config, host.tokenizer
        self.sampling_defaults = host.sampling_defaults   # generation_config.json's, for unset fields
        if config.max_context is None:
            config = replace(config, max_context=min(self.model_config.max_position, 4096))
        elif config.max_context > self.model_config.max_position:
            raise ValueError(f"max_context {config.max_context} exceeds the model's "
                             f"{self.model_config.max_position} positions")
        if config.seed is None:   # recorded in config (and so the trace header): a run can be replayed
            config = replace(config, seed=secrets.randbits(62))
        self.config, self.tracer = config, tracer
        shape = SlotShape(max_rows=config.max_rows, max_tokens=config.max_step_tokens,
                          max_pages=config.max_pages_per_row, top_logprobs=MAX_TOP_LOGPROBS,
                          mask_words=bitmask_words(self.model_config.vocab_size))
        spec = DeviceSpec(model=host.source, dtype=config.resolved_dtype(), shape=shape,
                          num_pages=config.num_pages, page_size=config.page_size, table_rows=config.max_seqs,
                          seed=config.weights_seed, cuda_graphs=config.cuda_graphs,
                          threads=config.device_threads)
        self.device = make_device(config.resolved_backend(), spec, tracer)
        self.scheduler = Scheduler(PageAllocator(config.num_pages), page_size=config.page_size,
                                   max_rows=config.max_rows, max_step_tokens=config.max_step_tokens,
                                   max_seqs=config.max_seqs, max_context=config.max_context)
        self.requests = RequestBook(self.tokenizer, self.model_config, tracer)
        self._failed = self._closed = False
        self._idle_since: int | None = None   # when the last tick left the engine with nothing to run
        self._scratch_row = config.max_seqs
        self._inflight: StepPlan | None = None
        self._slot_busy = [False] * NUM_SLOTS
        self._pageable_mask = np.zeros((config.max_rows, shape.mask_words), dtype=np.int32)
        self._rng = random.Random(config.seed)
        self.steps = self.tokens = self.zombie_rows = 0
        self._stats = self._snapshot()
        self._describe()

    def set_tracer(self, tracer: Tracer) -> None:
        """Swap the tracer between runs (benchmarks), only when idle; the old one gets the clock's drift."""
        assert self.idle, "swap tracers only when no step is in flight"
        self._close_clock()
        self.tracer = self.device.tracer = self.requests.tracer = tracer
        self._idle_since = None     # the new one: a fresh clock anchor, and no no-work from before its run
        self._describe()

    def _describe(self) -> None:
        """Put what a trace reader needs to know about this run into the trace header."""
        from dataclasses import asdict

        clock = self.device.anchor_clock() if self.tracer.level else {"device_error_ns": self.device.anchor_error_ns}
        self.tracer.describe(
            settings=asdict(self.config), model=self.config.model, backend=self.device.backend,
            device={"name": self.device.device_name}, clock=clock, seed=self.config.seed,
            model_config={"params": self.model_config.param_count, "vocab": self.model_config.vocab_size})

    def _close_clock(self) -> None:
        """At the end of a traced run, with the device idle: record how far its clock drifted."""
        if self.tracer.level and self.idle:
            self.tracer.describe(clock=self.device.clock_drift())

    # -- requests --------------------------------------------------------------------------
    def add_request(self, prompt: str | list[int], params: SamplingParams | None = None,
                    response_format=None) -> int:
        """Queue a request; invalid prompts, params or formats raise ValueError and change nothing.
        Without ``params``, the model's generation_config.json defaults apply."""
        params = params or self.default_params()
        if not isinstance(params, SamplingParams):
            raise ValueError(f"params must be SamplingParams, got {type(params).__name__}")
        seed = params.seed if params.seed is not None else self._rng.randrange(2**62)
        seq = self.requests.create(prompt, params, seed, response_format)
        self.scheduler.add(seq)   # raises if it can never fit; nothing recorded yet
        self.requests.register(seq)
        return seq.req_id

    def default_params(self, **given) -> SamplingParams:
        """SamplingParams from ``given``; a field given as None (or not given) takes the model's
        generation_config.json value when it has one (temperature, top_p, top_k, min_p), else its default."""
        return SamplingParams.with_defaults(self.sampling_defaults, **given)

    def compile_format(self, response_format) -> None:
        """Compile a response format into the engine's cache (thread-safe), so that a later
        add_request with it does not pay the compile on the engine's thread. Raises
        ConstraintError (a ValueError) for an invalid format."""
        self.requests.constraint(response_format)

    def abort(self, req_id: int) -> bool:
        seq = self.requests.get(req_id)
        if seq is None or seq.finalized:
            return False
        self.requests.finish(seq, FinishReason.ABORT)
        if self.scheduler.settle(seq, committed=False):   # a zombie is freed by its last commit instead
            self.requests.note_freed(seq)
        return True

    @property
    def idle(self) -> bool:
        return self.scheduler.idle and self._inflight is None

    # -- the tick ----------------------------------------------------------------------------
    def step(self) -> list[RequestDelta]:
        """One scheduler tick; returns what the commit produced. A DeviceError is fatal."""
        try:
            return self._tick()
        except DeviceError:
            self._failed = True
            raise

    def _tick(self) -> list[RequestDelta]:
        new = self._launch()                    # step t+1: plan, stage, forward, free rows' sampling
        if self.config.depth == 1:
            if new is not None:
                self._finalize(new)             # blocking: the same phases on one step, in series
                self._commit(new)
        else:
            if self._inflight is not None:
                self._commit(self._inflight)    # step t: overlaps step t+1's forward on the device
            if new is not None:
                self._finalize(new)             # constrained rows sample from the state commit(t) made
            self._inflight = new
        self._stats = self._settled()
        return self.requests.take_deltas()

    def _launch(self) -> StepPlan | None:
        tr = self.tracer
        index = self.scheduler.next_step
        t0 = tr.begin(Phase.PLAN, index, -1)
        plan = self.scheduler.plan()
        tr.end(Phase.PLAN, index, -1, t0)
        if plan is None:
            return None
        plan.slot = slot = plan.index % NUM_SLOTS
        assert not self._slot_busy[slot], "a slot is reused before its commit finished"
        self._slot_busy[slot] = True
        t0 = tr.begin(Phase.LAUNCH, plan.index, slot)
        self.requests.note_admitted(plan)
        ts = tr.begin(Phase.STAGE, plan.index, slot)
        stage_plan(self.device.staging(slot), plan, self.config.page_size, self._scratch_row)
        tr.end(Phase.STAGE, plan.index, slot, ts)
        B = plan.num_rows
        self.device.forward(slot, launch_shape(plan))
        if plan.split:
            self.device.sample(slot, 0, plan.split, masked=False, mode=sampling_mode(plan, 0, plan.split))
        if plan.split == B:
            self.device.copy_back(slot, B)      # nothing constrained: the step is complete on the device
        self.device.flush()                     # the step's commands reach the device together
        tr.end(Phase.LAUNCH, plan.index, slot, t0)
        return plan

    def _finalize(self, plan: StepPlan) -> None:
        lo, hi, slot = plan.split, plan.num_rows, plan.slot
        if lo == hi:
            return
        tr = self.tracer
        t0 = tr.begin(Phase.FINALIZE, plan.index, slot)
        sync = self.config.mask_upload == "sync"
        masks = self._pageable_mask if sync else self.device.staging(slot).mask
        tm = tr.begin(Phase.MASK_BUILD, plan.index, slot)
        fill_masks(masks, plan)
        tr.end(Phase.MASK_BUILD, plan.index, slot, tm)
        tm = tr.begin(Phase.MASK_UPLOAD, plan.index, slot)
        if sync:
            self.device.upload_mask_sync(slot, masks, lo, hi, plan.index)
        else:
            self.device.upload_mask(slot, lo, hi)
        tr.end(Phase.MASK_UPLOAD, plan.index, slot, tm)
        self.device.sample(slot, lo, hi, masked=True, mode=sampling_mode(plan, lo, hi))
        self.device.copy_back(slot, hi)
        self.device.flush()
        tr.end(Phase.FINALIZE, plan.index, slot, t0)

    def _commit(self, plan: StepPlan) -> None:
        tr, slot = self.tracer, plan.slot
        t0 = tr.begin(Phase.COMMIT, plan.index, slot)
        self.device.wait_copied(slot, plan.index, expected=True)   # the design's one expected wait
        st = self.device.staging(slot)
        tokens = st.out_tokens[:plan.num_rows].tolist()
        ts = tr.begin(Phase.STREAM_OUT, plan.index, slot)
        zombies = emitted = 0
        for b, (row, token) in enumerate(zip(plan.rows, tokens)):
            seq = row.seq
            if seq.finalized:
                zombies += 1                    # launched before its sequence stopped: no-op
            elif row.samples:
                self.requests.accept(seq, token, read_logprob(st, b, token, seq.params.logprobs))
                emitted += 1
            if self.scheduler.settle(seq, committed=True):   # free late: no launched step holds it now
                self.requests.note_freed(seq)
        tr.end(Phase.STREAM_OUT, plan.index, slot, ts)
        self._slot_busy[slot] = False
        self.steps += 1
        self.tokens += emitted
        self.zombie_rows += zombies
        tr.device_ops(plan.index, slot, lambda: self.device.completed_ops(slot))
        tr.step(plan.index, kind=plan.kind, slot=slot, rows=plan.num_rows, zombie_rows=zombies,
                constrained_rows=plan.num_rows - plan.split, tokens=emitted)
        tr.end(Phase.COMMIT, plan.index, slot, t0)

    # -- conveniences --------------------------------------------------------------------------
    def run_until_idle(self) -> None:
        while not self.idle:
            self.step()

    def generate(self, prompts: Seq[str | list[int]], params: SamplingParams | Seq[SamplingParams] | None = None,
                 response_format=None) -> list[RequestOutput]:
        if params is None or isinstance(params, SamplingParams):
            params = [params or self.default_params()] * len(prompts)
        ids = [self.add_request(p, sp, response_format) for p, sp in zip(prompts, params)]
        pending = set(ids)
        while pending:
            for d in self.step():
                if d.finished:
                    pending.discard(d.req_id)
        return [self.requests.output(i, forget=True) for i in ids]

    def stream(self, prompt: str | list[int], params: SamplingParams | None = None,
               response_format=None) -> Iterator[RequestDelta]:
        """Yield this request's deltas as the engine produces them (drives the engine itself)."""
        rid = self.add_request(prompt, params, response_format)
        while True:
            for d in self.step():
                if d.req_id == rid:
                    yield d
                    if d.finished:
                        return

    def wait_for_work(self, wait: Callable[[], object]) -> None:
        """Run ``wait``, the caller's wait for a request while the engine has none (idle: nothing
        running, waiting or in flight), and record the time the engine had nothing to run as a
        ``no_work`` span: step = the next step the engine will run, slot -1, on the caller's
        thread. The analysis reports the device's idle inside it as no work, apart from bubbles:
        a server with no traffic is no host fault.

        The span runs from the end of the tick that left the engine idle (the commit of its last
        step stays out: that is work) to the end of ``wait``; what the caller did in between (a
        server handing the finished request its result) happened with nothing to run, so no
        host fix could have fed the device sooner. What follows the wait (the new request's
        admission, plan, launch) is host time as always. Called without a tick since the engine
        last had work (or after ``add_request``), it covers ``wait`` alone."""
        if not self.idle:
            raise RuntimeError("wait_for_work: the engine has work (a request running, waiting or in flight)")
        tr, step = self.tracer, self.scheduler.next_step
        t0 = tr.begin(Phase.NO_WORK, step, -1)
        if self._idle_since is not None:
            t0 = min(t0, self._idle_since)
        try:
            wait()
        finally:
            self._idle_since = None
            tr.end(Phase.NO_WORK, step, -1, t0)

    def stats(self) -> EngineStats:
        """The counters as of the last tick: safe to read from any thread (a web handler,
        a metrics scrape) while the engine's own thread goes on mutating its state."""
        return self._stats

    def _settled(self) -> EngineStats:
        """The counters at a tick's end; a tick that leaves nothing to run starts the engine's no
        work (``wait_for_work``), one that leaves work ends it."""
        stats = self._snapshot()
        if not stats.idle:
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = now_ns()
        return stats

    def _snapshot(self) -> EngineStats:
        sched = self.scheduler
        return EngineStats(steps=self.steps, tokens=self.tokens, zombie_rows=self.zombie_rows,
                           running=len(sched.running), waiting=len(sched.waiting),
                           kv_pages_used=sched.allocator.num_used, kv_pages_total=sched.allocator.capacity,
                           idle=self.idle)

    def check_invariants(self) -> None:
        """Raise AssertionError if a sequence, page, row or slot is accounted wrongly; when idle,
        everything must be free. Call it from the engine's thread (tests do after every tick)."""
        self.scheduler.check_invariants()
        if self.idle:
            assert not any(self._slot_busy), "a slot is still held"

    def check_alive(self) -> None:
        """Raise ``DeviceError`` if the device died (a worker killed while the engine was idle)."""
        self.device.check_alive()

    def close(self) -> None:
        """Commit what is in flight (unless the device failed: nothing more can come back),
        then release the device and the tracer; safe to call after any failure, and twice."""
        inflight, self._inflight = self._inflight, None
        try:
            if inflight is not None and not self._failed:
                self._commit(inflight)
            if not self._failed and not self._closed:
                self._close_clock()
        except DeviceError:
            pass   # the failure was (or will be) raised where it happened; closing must not mask it
        finally:
            self._closed = True
            try:
                self.device.close()
            finally:
                self.tracer.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
