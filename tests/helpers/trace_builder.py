"""Hand-built traces with exact timings, for tests and demos (no engine needed).

Two levels:

* ``TraceBuilder``: append records one by one (times in ns).
* ``simulate``: a deterministic model of the engine's tick (plan, launch,
  commit, finalize; depth 1 or 2; zombies; constrained rows with an async or
  synchronous mask upload; injected faults) that emits the trace the engine
  would. ``blocking_trace``, ``pipelined_trace``, ``sync_bug_trace``,
  ``item_sync_trace``, ``host_delay_trace`` and ``copy_wait_trace`` are its
  usual shapes.

The model: each device op starts at ``max(enqueued + dispatch_ns, stream free,
dependency end)``; a host wait ends ``wake_ns`` after what it waits for. At
depth 2 a tick is plan(t+1), launch(t+1), commit(t), finalize(t+1); at depth 1
it is plan(t), launch(t), finalize(t), commit(t).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from photon_trace.telemetry.records import (
    DeviceSpan, HostSpan, HostWait, RequestRecord, StepRecord, Trace)

from helpers.code_sites import COMMIT_SITE, ITEM_SITE, MASK_SYNC_SITE  # noqa: F401  (tests import them from here)

US = 1_000
MS = 1_000_000


class TraceBuilder:
    """Collects records; ``build()`` returns the Trace. Every method returns self."""

    def __init__(self, **settings):
        self.header = {"version": 1, "backend": "sim", "settings": dict(settings),
                       "clock": {"wall_ns": 0, "mono_ns": 0, "device_error_ns": 0}}
        self.host_spans: list[HostSpan] = []
        self.device_spans: list[DeviceSpan] = []
        self.waits: list[HostWait] = []
        self.steps: list[StepRecord] = []
        self.requests: list[RequestRecord] = []

    def host(self, phase: str, step: int, t0: int, t1: int, *, slot: int | None = None,
             thread: str = "scheduler") -> TraceBuilder:
        self.host_spans.append(HostSpan(phase, step, step % 2 if slot is None else slot, t0, t1, thread))
        return self

    def device(self, stream: str, op: str, step: int, t0: int, t1: int, *, enqueued: int | None = None,
               slot: int | None = None) -> TraceBuilder:
        self.device_spans.append(DeviceSpan(stream, op, step, step % 2 if slot is None else slot, t0, t1,
                                            t0 if enqueued is None else enqueued))
        return self

    def compute(self, op: str, step: int, t0: int, t1: int, *, enqueued: int | None = None) -> TraceBuilder:
        return self.device("compute", op, step, t0, t1, enqueued=enqueued)

    def copy(self, op: str, step: int, t0: int, t1: int, *, enqueued: int | None = None) -> TraceBuilder:
        return self.device("copy", op, step, t0, t1, enqueued=enqueued)

    def wait(self, reason: str, t0: int, t1: int, *, expected: bool, site: str, step: int) -> TraceBuilder:
        self.waits.append(HostWait(reason, expected, t0, t1, site, step))
        return self

    def step(self, step: int, *, kind: str = "decode", rows: int = 1, zombie_rows: int = 0,
             constrained_rows: int = 0, tokens: int | None = None) -> TraceBuilder:
        tokens = rows - zombie_rows if tokens is None else tokens
        self.steps.append(StepRecord(step, kind, step % 2, rows, zombie_rows, constrained_rows, tokens))
        return self

    def request(self, req_id: int, event: str, t: int, tokens: int = 0) -> TraceBuilder:
        self.requests.append(RequestRecord(req_id, event, t, tokens))
        return self

    def build(self) -> Trace:
        return Trace(dict(self.header), list(self.host_spans), list(self.device_spans),
                     list(self.waits), list(self.steps), list(self.requests))


@dataclass(frozen=True)
class LoopCosts:
    """Durations of the modelled loop, in ns."""
    forward_ns: int = 2 * MS
    prefill_ns: int = 4 * MS
    sample_ns: int = 200 * US
    copy_ns: int = 30 * US          # copy-back of the sampled tokens
    mask_upload_ns: int = 30 * US
    plan_ns: int = 250 * US
    launch_ns: int = 150 * US
    commit_ns: int = 300 * US
    finalize_ns: int = 50 * US
    mask_build_ns: int = 150 * US
    dispatch_ns: int = 5 * US       # enqueue to earliest start: per-command overhead
    wake_ns: int = 2 * US           # event to the waiting host running again


@dataclass
class _Request:
    req_id: int
    length: int
    scheduled: int = 0      # live steps launched with it
    committed: int = 0
    finalized: bool = False


@dataclass
class _Stream:
    queue: list[int]
    active: _Request | None = None


@dataclass
class _Launched:
    step: int
    live: list[_Request]
    zombies: int
    prefill: bool
    copy_end: int = 0
    rows: int = 0
    kind: str = "decode"
    constrained: int = 0


@dataclass
class _Sim:
    b: TraceBuilder
    costs: LoopCosts
    constrained: bool
    mask_upload: str
    item_sync: bool
    plan_delay_ns: int
    plan_delay_steps: frozenset[int] | None
    streams: list[_Stream]
    h: int = 0
    compute_free: int = 0
    copy_free: int = 0
    next_req: int = 0
    launched: dict[int, _Launched] = field(default_factory=dict)

    def run_op(self, stream: str, op: str, step: int, dur: int, enq: int, after: int = 0) -> int:
        free = self.compute_free if stream == "compute" else self.copy_free
        t0 = max(enq + self.costs.dispatch_ns, free, after)
        self.b.device(stream, op, step, t0, t0 + dur, enqueued=enq)
        if stream == "compute":
            self.compute_free = t0 + dur
        else:
            self.copy_free = t0 + dur
        return t0 + dur

    def phase(self, name: str, step: int, dur: int) -> None:
        self.b.host(name, step, self.h, self.h + dur)
        self.h += dur

    def wait(self, until: int, reason: str, expected: bool, site: str, step: int) -> None:
        t1 = max(self.h, until + self.costs.wake_ns)
        self.b.wait(reason, self.h, t1, expected=expected, site=site, step=step)
        self.h = t1

    def plan(self, step: int) -> _Launched | None:
        t0 = self.h
        live: list[_Request] = []
        zombies = 0
        prefill = False
        for s in self.streams:
            if s.active is not None and s.active.finalized:
                self.b.request(s.active.req_id, "freed", self.h)
                s.active = None
            if s.active is None and s.queue:
                s.active = _Request(self.next_req, s.queue.pop(0))
                self.b.request(s.active.req_id, "admitted", self.h)
                self.next_req += 1
            r = s.active
            if r is None:
                continue
            if r.scheduled >= r.length:   # finishes at a commit not yet run: a zombie
                zombies += 1
                continue
            prefill |= r.scheduled == 0
            r.scheduled += 1
            live.append(r)
        dur = self.costs.plan_ns
        if self.plan_delay_ns and (self.plan_delay_steps is None or step in self.plan_delay_steps):
            dur += self.plan_delay_ns
        self.b.host("plan", step, t0, t0 + dur)
        self.h = t0 + dur
        if not live and not zombies:
            return None
        decode = any(r.scheduled > 1 for r in live) or zombies > 0
        kind = "mixed" if prefill and decode else "prefill" if prefill else "decode"
        rows = len(live) + zombies
        return _Launched(step, live, zombies, prefill, rows=rows, kind=kind,
                         constrained=rows if self.constrained else 0)

    def launch(self, st: _Launched) -> None:
        c = self.costs
        self.phase("launch", st.step, c.launch_ns)
        self.run_op("compute", "prefill" if st.prefill else "forward", st.step,
                    c.prefill_ns if st.prefill else c.forward_ns, self.h)
        if not st.constrained:
            end = self.run_op("compute", "sample", st.step, c.sample_ns, self.h)
            st.copy_end = self.run_op("copy", "copy_back", st.step, c.copy_ns, self.h, after=end)

    def finalize(self, st: _Launched) -> None:
        c = self.costs
        t0 = self.h
        if st.constrained:
            self.phase("mask_build", st.step, c.mask_build_ns)
            if self.mask_upload == "sync":  # pageable memory: the copy drains the device first
                drained = self.compute_free
                self.b.device("copy", "mask_upload", st.step, drained, drained + c.mask_upload_ns, enqueued=self.h)
                self.copy_free = max(self.copy_free, drained + c.mask_upload_ns)
                self.wait(drained + c.mask_upload_ns, "mask upload: drain (sync)", False, MASK_SYNC_SITE, st.step)
                upload_end = drained + c.mask_upload_ns
            else:
                self.phase("mask_upload", st.step, 0)
                upload_end = self.run_op("copy", "mask_upload", st.step, c.mask_upload_ns, self.h)
        self.h += c.finalize_ns
        if st.constrained:
            end = self.run_op("compute", "masked_sample", st.step, c.sample_ns, self.h, after=upload_end)
            st.copy_end = self.run_op("copy", "copy_back", st.step, c.copy_ns, self.h, after=end)
        self.b.host("finalize", st.step, t0, self.h)

    def commit(self, st: _Launched) -> None:
        c = self.costs
        t0 = self.h
        self.wait(st.copy_end, "commit: copy-back", True, COMMIT_SITE, st.step)
        self.h += c.commit_ns // 2
        if self.item_sync:  # a host read of a device value: waits for everything queued
            self.wait(self.compute_free, "host read of a device value (.item())", False, ITEM_SITE, st.step)
        self.h += c.commit_ns - c.commit_ns // 2
        for r in st.live:
            r.committed += 1
            if r.committed == 1:
                self.b.request(r.req_id, "first_token", self.h)
            if r.committed == r.length:
                r.finalized = True
                self.b.request(r.req_id, "finalized", self.h, r.length)
        self.b.host("commit", st.step, t0, self.h)
        self.b.step(st.step, kind=st.kind, rows=st.rows, zombie_rows=st.zombies,
                    constrained_rows=st.constrained, tokens=len(st.live))


def simulate(*, depth: int = 2, streams: int = 1, requests_per_stream: int = 1, tokens: int | list[int] = 16,
             costs: LoopCosts = LoopCosts(), constrained: bool = False, mask_upload: str = "async",
             item_sync: bool = False, plan_delay_ns: int = 0, plan_delay_steps: set[int] | None = None,
             **cost_overrides: int) -> Trace:
    """Run the modelled loop and return its trace.

    ``tokens``: generated tokens per request (one value, or one per request in
    admission order, stream by stream). ``cost_overrides`` replace LoopCosts
    fields, e.g. ``forward_ns=1 * MS``.
    """
    costs = replace(costs, **cost_overrides)
    n = streams * requests_per_stream
    lengths = [tokens] * n if isinstance(tokens, int) else list(tokens)
    if len(lengths) != n:
        raise ValueError(f"{len(lengths)} lengths for {n} requests")
    b = TraceBuilder(depth=depth, mask_upload=mask_upload, streams=streams, constrained=constrained)
    queues = [lengths[i * requests_per_stream:(i + 1) * requests_per_stream] for i in range(streams)]
    sim = _Sim(b, costs, constrained, mask_upload, item_sync, plan_delay_ns,
               frozenset(plan_delay_steps) if plan_delay_steps is not None else None,
               [_Stream(q) for q in queues])
    for i in range(n):
        b.request(i, "arrival", 0)
    step = 0
    pending: _Launched | None = None
    while True:
        st = sim.plan(step)
        if depth == 1:
            if st is None:
                break
            sim.launch(st)
            sim.finalize(st)
            sim.commit(st)
        else:
            if st is not None:
                sim.launch(st)
            if pending is not None:
                sim.commit(pending)
            if st is None:
                break
            sim.finalize(st)
            pending = st
        step += 1
    return b.build()


def blocking_trace(**kw) -> Trace:
    """Depth 1: the device idles through commit, plan and launch every step."""
    return simulate(depth=1, **kw)


def pipelined_trace(**kw) -> Trace:
    """Depth 2 with the host's bookkeeping hidden under the forward."""
    return simulate(depth=2, **kw)


def sync_bug_trace(**kw) -> Trace:
    """Pipelined, constrained rows, mask uploaded synchronously from pageable memory."""
    kw.setdefault("constrained", True)
    return simulate(depth=2, mask_upload="sync", **kw)


def item_sync_trace(**kw) -> Trace:
    """Pipelined with a host read of a device value inside commit."""
    return simulate(depth=2, item_sync=True, **kw)


def host_delay_trace(delay_ns: int = 3 * MS, **kw) -> Trace:
    """Pipelined with ``delay_ns`` of extra host work in plan, longer than the forward."""
    return simulate(depth=2, plan_delay_ns=delay_ns, **kw)


def copy_wait_trace(**kw) -> Trace:
    """Pipelined, constrained rows, a mask upload slower than the forward it hides under."""
    kw.setdefault("constrained", True)
    kw.setdefault("mask_upload_ns", 2_500 * US)
    return simulate(depth=2, **kw)
