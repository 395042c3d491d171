"""Hand-built traces with exact timings, for tests (no engine needed).

* ``TraceBuilder``: append records one by one (times in ns), for tiny hand-made traces.
* ``simulate``: the loop simulator (loop_sim.py) with flat, exact costs (``LoopCosts``'
  defaults, no jitter), so tests can derive expectations from the costs by hand.
  ``blocking_trace``, ``pipelined_trace``, ``sync_bug_trace``, ``item_sync_trace``,
  ``host_delay_trace`` and ``copy_wait_trace`` are its usual shapes.
"""
from __future__ import annotations

from dataclasses import replace

from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, RequestRecord, StepRecord, Trace

from helpers.code_sites import COMMIT_SITE, ITEM_SITE, MASK_SYNC_SITE  # noqa: F401  (tests import them from here)
from helpers.loop_sim import (  # noqa: F401  (tests import them from here)
    ITEM_REASON, MASK_SYNC_REASON, MS, US, LoopCosts, SyntheticRun, synthetic_trace)


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
             thread: str = "scheduler", cpu_ns: int = -1, runq_ns: int = -1) -> TraceBuilder:
        self.host_spans.append(HostSpan(phase, step, step % 2 if slot is None else slot, t0, t1, thread,
                                        cpu_ns, runq_ns))
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

    def wait(self, reason: str, t0: int, t1: int, *, expected: bool, site: str, step: int,
             cpu_ns: int = -1, runq_ns: int = -1) -> TraceBuilder:
        self.waits.append(HostWait(reason, expected, t0, t1, site, step, cpu_ns, runq_ns))
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


def simulate(*, depth: int = 2, streams: int = 1, requests_per_stream: int = 1, tokens: int | list[int] = 16,
             costs: LoopCosts = LoopCosts(), constrained: bool = False, mask_upload: str = "async",
             item_sync: bool = False, plan_delay_ns: int = 0, plan_delay_steps: set[int] | None = None,
             slow_forward_every: int = 0, slow_forward_ns: int = 0, **cost_overrides: int) -> Trace:
    """The loop simulator (loop_sim.py) with exact costs: every request arrives at the start,
    ``streams`` decode at once, no jitter; runs until every request is done.

    ``tokens``: generated tokens per request (one value, or one per request in arrival
    order). ``cost_overrides`` replace LoopCosts fields, e.g. ``forward_ns=1 * MS``.
    """
    n = streams * requests_per_stream
    lengths = [tokens] * n if isinstance(tokens, int) else list(tokens)
    if len(lengths) != n:
        raise ValueError(f"{len(lengths)} lengths for {n} requests")
    if mask_upload not in ("async", "sync"):
        raise ValueError(f"mask_upload is 'async' or 'sync', not {mask_upload!r}")
    run = SyntheticRun(
        steps=None, depth=depth, streams=streams, requests=n, output_tokens=tuple(lengths),
        constrained_every=1 if constrained else 0, arrival_gap_ns=0, costs=replace(costs, **cost_overrides),
        jitter=0.0, mask_upload_bug=mask_upload == "sync", item_sync=item_sync, plan_delay_ns=plan_delay_ns,
        plan_delay_steps=None if plan_delay_steps is None else frozenset(plan_delay_steps),
        slow_forward_every=slow_forward_every, slow_forward_ns=slow_forward_ns)
    return synthetic_trace(run)


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
    """Pipelined with a host read of a device value right after commit's wait (fault_helpers' fault (b))."""
    return simulate(depth=2, item_sync=True, **kw)


def host_delay_trace(delay_ns: int = 3 * MS, **kw) -> Trace:
    """Pipelined with ``delay_ns`` of extra host work in plan, longer than the forward."""
    return simulate(depth=2, plan_delay_ns=delay_ns, **kw)


def copy_wait_trace(**kw) -> Trace:
    """Pipelined, constrained rows, a mask upload slower than the forward it hides under."""
    kw.setdefault("constrained", True)
    kw.setdefault("mask_upload_ns", 2_500 * US)
    return simulate(depth=2, **kw)
