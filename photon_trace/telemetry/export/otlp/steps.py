"""The step side of ``OtelSink``: a step's records as they arrive, and the spans of a sampled one.

Which steps are sampled, and their bubble, is the sink's decision (sink.py); this module
builds what a sampled step exports, under one ``step`` span (its own trace, from the
step's first to last record):

* one span per host phase (``plan``, ``launch``, ``commit``, ``finalize``), child of the
  step; the FULL sub-phases are children of the phase around them on their thread;
* one ``host_wait`` span per wait, child of the innermost phase around it (of the step
  when none is), its call site in ``code.file.path`` (and ``code.line.number``);
* one ``device.<op>`` span per device op, child of the step, with its enqueue time and
  queue delay.

This module imports OpenTelemetry only inside ``step_spans`` (the sink preloads it when made).
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from photon_trace.telemetry.export.otlp.requests import ATTR
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, StepRecord
from photon_trace.telemetry.tracer import TOP_PHASES


@dataclass
class StepBuf:
    """One step's records, gathered until the step is complete (its record and its commit)."""
    host: list[HostSpan] = field(default_factory=list)
    device: list[DeviceSpan] = field(default_factory=list)
    waits: list[HostWait] = field(default_factory=list)
    record: StepRecord | None = None
    committed: bool = False


def step_spans(tracer, index: int, b: StepBuf, bounds: tuple[int, int], sampled: dict,
               wall: Callable[[int], int]) -> Generator[None, None, object]:
    """Start and end step ``index``'s spans through ``tracer``: the root on ``bounds`` (monotonic
    ns, mapped by ``wall``) with ``sampled`` (why and what the sink sampled) among its attributes,
    then its children. Yields after each child (a slice unit); returns the root's span context,
    which the requests that ran meanwhile link to."""
    from opentelemetry import trace
    from opentelemetry.context import Context

    t0, t1 = bounds
    attrs = {ATTR + "step": index, **sampled}
    r = b.record
    if r is not None:
        attrs.update({ATTR + "step.kind": r.kind, ATTR + "slot": r.slot, ATTR + "rows": r.rows,
                      ATTR + "zombie_rows": r.zombie_rows, ATTR + "constrained_rows": r.constrained_rows,
                      ATTR + "tokens": r.tokens})
    root = tracer.start_span("step", context=Context(), start_time=wall(t0), attributes=attrs)
    root_ctx = trace.set_span_in_context(root)
    phases: list[tuple[HostSpan, object]] = []
    for s in sorted(b.host, key=lambda s: (s.phase not in TOP_PHASES, s.t0)):
        parent_ctx = root_ctx
        if s.phase not in TOP_PHASES:
            around = _around(phases, s.t0, s.t1, s.thread)
            parent_ctx = trace.set_span_in_context(around) if around is not None else root_ctx
        span = tracer.start_span(s.phase, context=parent_ctx, start_time=wall(s.t0),
                                 attributes={ATTR + "step": s.step, ATTR + "slot": s.slot,
                                             "thread.name": s.thread})
        phases.append((s, span))
        yield
    for w in b.waits:
        around = _around(phases, w.t0, w.t1, None)
        file, _, line = w.site.rpartition(":")
        attrs = {ATTR + "step": w.step, ATTR + "wait.reason": w.reason,
                 ATTR + "wait.expected": w.expected, ATTR + "wait.site": w.site,
                 "code.file.path": file or w.site}
        if line.isdigit():
            attrs["code.line.number"] = int(line)
        span = tracer.start_span(
            "host_wait", start_time=wall(w.t0), attributes=attrs,
            context=trace.set_span_in_context(around) if around is not None else root_ctx)
        span.end(end_time=wall(w.t1))
        yield
    for d in sorted(b.device, key=lambda d: d.t0):
        span = tracer.start_span(
            f"device.{d.op}", context=root_ctx, start_time=wall(d.t0),
            attributes={ATTR + "step": d.step, ATTR + "slot": d.slot, ATTR + "stream": d.stream,
                        ATTR + "op": d.op, ATTR + "enqueued_ns": d.enqueued,
                        ATTR + "queue_delay_ns": d.t0 - d.enqueued})
        span.end(end_time=wall(d.t1))
        yield
    for s, span in reversed(phases):
        span.end(end_time=wall(s.t1))
    root.end(end_time=wall(t1))
    return root.get_span_context()


def _around(phases, t0: int, t1: int, thread: str | None):
    """The innermost host span in ``phases`` enclosing [t0, t1] (on ``thread`` if given)."""
    best = None
    for s, span in phases:
        if s.t0 <= t0 and t1 <= s.t1 and (thread is None or s.thread == thread):
            if best is None or s.t1 - s.t0 < best[0].t1 - best[0].t0:
                best = (s, span)
    return best[1] if best is not None else None
