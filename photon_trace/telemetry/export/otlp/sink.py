"""OpenTelemetry export: sampled per-step spans and one span per request, over OTLP/HTTP.

``OtelSink`` is a recorder sink in two halves (recording/sinks.py): ``prepare`` builds the
spans of each chunk one span at a time and encodes them a few spans at a time,
in the engine's device waits; ``deliver`` POSTs the encoded request on the
sink's own thread (http.py), so the engine never waits on the network and
no exporter thread competes with it for the GIL. The endpoint is configured by
the standard variables: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (spans go to
``<endpoint>/v1/traces``) or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_TIMEOUT``,
``OTEL_EXPORTER_OTLP_COMPRESSION``; ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` apply to the resource. When no collector answers,
a request is retried until its timeout and its spans are counted as lost
(``lost``, the trace header's ``dropped["otlp.spans"]``); the recorder's close
gives up on the sink at its deadline and ``close`` here after ``shutdown_timeout_s``.

Spans (monotonic times mapped to wall clock through the header's anchor):

* ``step`` — one trace per sampled step, from the step's first to last record.
  Sampled: every ``every_n_steps``-th step, every step with a bubble (a gap on
  the compute stream before or between its ops) over ``bubble_threshold_ns``,
  and every step with an unexpected host wait (``photon_trace.sampled_because``).
  Its children (host phases, waits, device ops) are built in steps.py.
* ``{operation} {model}`` — one per request (span kind SERVER), arrival to
  finalized (or aborted), with the GenAI semantic conventions' attributes
  (``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.*``,
  ``gen_ai.response.id``/``finish_reasons``, ``gen_ai.usage.*``): what the records
  carry, plus what the server tells ``request_attributes`` (the request's
  parameters, its operation and response id, how it finished);
  ``admitted``/``first_token`` events, and links to the sampled step spans that
  ran while it was active.

A step's bubble is device idle while the engine had work: the time between the
last request ending and the next arriving (nothing to do) is not a bubble.

The resource (``photon_trace.backend``, ``photon_trace.device``, ...) is made when
the first span is exported, from the header as ``describe()`` left it by then: an
engine describes itself after its tracer's sinks may have opened.

``opentelemetry`` is imported only when an ``OtelSink`` is made; the engine never needs it.
"""
from __future__ import annotations

import logging
import os
import time
from collections import defaultdict, deque
from collections.abc import Generator

from photon_trace.telemetry.export.otlp.http import ExportError, OtlpHttp, encode, preload, span_collector
from photon_trace.telemetry.export.otlp.requests import ATTR, RequestBuf, RequestSpans
from photon_trace.telemetry.export.otlp.steps import StepBuf, step_spans
from photon_trace.telemetry.trace.pieces import run_to_end
from photon_trace.telemetry.trace.records import COMPUTE_OPS, RECORD_KINDS, Chunk, RequestRecord, Trace
from photon_trace.telemetry.tracer import Phase

log = logging.getLogger(__name__)
_COMMIT, _PLAN, _NO_WORK = Phase.COMMIT.span_name, Phase.PLAN.span_name, Phase.NO_WORK.span_name
_BETWEEN_STEPS = frozenset((_NO_WORK, Phase.SERVE.span_name))   # no step's: the engine idle, the server loop


class OtelSink:
    """Recorder sink exporting sampled step spans and request spans over OTLP.

    ``exporter``: any SDK ``SpanExporter``, called with the spans on the sink's thread
    (default: spans encoded in the engine's waits and POSTed over OTLP/HTTP, configured
    from the environment).
    ``model``: ``gen_ai.request.model`` (default: the header's ``model``).
    ``operation``: ``gen_ai.operation.name`` ("text_completion", "chat", ...).
    ``max_pending_steps``: a step whose commit never arrives is exported anyway
    once this many newer steps are pending.
    """

    def __init__(self, *, every_n_steps: int = 100, bubble_threshold_ns: int = 1_000_000,
                 operation: str = "text_completion", model: str | None = None, exporter=None,
                 service_name: str | None = None, shutdown_timeout_s: float = 5.0,
                 max_pending_steps: int = 64) -> None:
        if every_n_steps < 1:
            raise ValueError("every_n_steps must be >= 1")
        preload()   # now, not in the first flush: that runs in one of the engine's device waits
        self.every_n_steps = every_n_steps
        self.bubble_threshold_ns = bubble_threshold_ns
        self.operation = operation
        self.model = model
        self.service_name = service_name
        self.shutdown_timeout_s = shutdown_timeout_s
        self.max_pending_steps = max_pending_steps
        self._exporter = exporter
        self._transport = None
        self.spans_prepared = 0      # spans built and handed to delivery
        self.lost = 0                # spans whose export failed (the recorder counts them as dropped)
        self.export_ns = 0           # time spent sending (or in the exporter), on the sink's thread
        self._steps: dict[int, StepBuf] = defaultdict(StepBuf)
        self._reqs = RequestSpans()
        self._emitted: deque = deque(maxlen=8192)  # (t0, t1, span context) of exported step spans
        self._exported_until = 0     # end time of the latest exported step
        self._last_compute_end: int | None = None
        self.steps_seen = 0
        self.steps_exported = 0
        self.requests_exported = 0
        self._provider = None
        self._opened = False

    drop_key = "otlp.spans"

    # -- sink protocol: prepare in the engine's waits, deliver on the sink's thread ------
    def prepare(self, event: str, arg) -> Generator[None, None, list | None]:
        """``open``: take the header (the provider starts with the first span); ``write``: the
        chunk's ready spans, encoded; ``close``: every span still pending, encoded. Yields
        between steps and pieces."""
        if event == "open":
            self.open(arg)
            return None
        if not self._opened:
            return None
        if event == "write":
            self._buffer(arg)
            yield from self._emit_steps(final=False)
            yield from self._emit_requests(final=False)
        else:
            self._opened = False
            yield from self._emit_steps(final=True)
            yield from self._emit_requests(final=True)
        if self._provider is None:   # no span yet: the provider starts with the first one
            return None
        spans = self._collector.take()
        if event == "close":
            self._provider.shutdown()
            self._provider = None
        self.spans_prepared += len(spans)
        if self._exporter is not None:
            return [(spans, len(spans))] if spans else []
        return (yield from encode(spans))

    def weigh(self, payload: list | None) -> int:
        return sum(n for _, n in payload or ())

    def deliver(self, event: str, payload: list | None) -> None:
        """Send prepared spans; on ``close``, within ``shutdown_timeout_s`` (then release)."""
        deadline = time.monotonic() + self.shutdown_timeout_s if event == "close" else None
        for body, n in payload or ():
            t0 = time.perf_counter_ns()
            try:
                if self._exporter is not None:
                    if getattr(self._exporter.export(body), "name", "") == "FAILURE":
                        self.lost += n
                else:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    self._transport.post(body, left)
            except ExportError as e:
                if not self._transport.aborted:   # an abandoned sink's spans are counted by the recorder
                    self.lost += n
                    log.warning("photon_trace: OTLP export failed, %d spans lost: %s", n, e)
            finally:
                self.export_ns += time.perf_counter_ns() - t0
        if event == "close":
            if self._exporter is not None:
                self._exporter.shutdown()
            elif self._transport is not None:
                self._transport.close()

    def abort(self) -> None:
        """End a request in flight (the recorder gave up on this sink at close)."""
        if self._transport is not None:
            self._transport.abort()

    def request_attributes(self, req_id: int, attrs: dict, final: bool = False) -> None:
        """Attributes for request ``req_id``'s span, from any thread: its parameters when it is
        added, how it ended (``final``) when it finishes. A finished request's span waits (a few
        flushes at most) for the final ones."""
        self._reqs.attributes(req_id, attrs, final)

    def open(self, header: dict) -> None:
        from photon_trace.telemetry.trace.header import merge_header

        self._header = {}
        merge_header(self._header, header)
        clock = header.get("clock") or {}
        self._offset = int(clock.get("wall_ns", 0)) - int(clock.get("mono_ns", 0))
        self._provider = None
        self._opened = True

    def _start(self) -> None:
        """The provider and exporter, made with the first span (see the module docstring)."""
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        header = self._header
        if self.model is None:
            model = header.get("model")
            self.model = (model.get("name") if isinstance(model, dict) else model) or "unknown"
        attrs = {"service.name": self.service_name or os.environ.get("OTEL_SERVICE_NAME") or "photon_trace",
                 "service.version": str(header.get("photon_trace_version", "")),
                 "host.name": str((header.get("host") or {}).get("hostname", "")),
                 ATTR + "backend": str(header.get("backend")),
                 ATTR + "device": str((header.get("device") or {}).get("name")
                                      if isinstance(header.get("device"), dict) else header.get("device")),
                 ATTR + "trace_level": str(header.get("trace_level"))}
        if self.service_name is None and os.environ.get("OTEL_SERVICE_NAME"):
            attrs.pop("service.name")
        self._provider = TracerProvider(resource=Resource.create(attrs), shutdown_on_exit=False)
        if self._exporter is None and self._transport is None:
            self._transport = OtlpHttp()
        self._collector = span_collector()
        self._provider.add_span_processor(self._collector)
        self._tracer = self._provider.get_tracer("photon_trace.telemetry")

    def _otel(self):
        if self._provider is None:
            self._start()
        return self._tracer

    def write(self, chunk: Chunk) -> None:
        """Build, encode and send at once (direct use; a recorder calls prepare/deliver)."""
        self.deliver("write", run_to_end(self.prepare("write", chunk)))

    def close(self) -> None:
        if self._opened:
            self.deliver("close", run_to_end(self.prepare("close", None)))

    def _buffer(self, chunk: Chunk) -> None:
        if chunk.header:
            from photon_trace.telemetry.trace.header import merge_header
            merge_header(self._header, chunk.header)
        if "clock" in chunk.header:
            c = self._header.get("clock", {})
            self._offset = int(c.get("wall_ns", 0)) - int(c.get("mono_ns", 0))
        for s in chunk.host_spans:
            if s.phase in _BETWEEN_STEPS:
                continue    # between steps, no step's: a step's span covers its own work only
            b = self._steps[s.step]
            b.host.append(s)
            if s.phase == _COMMIT:
                b.committed = True
        for d in chunk.device_spans:
            self._steps[d.step].device.append(d)
        for w in chunk.waits:
            self._steps[w.step].waits.append(w)
        for r in chunk.steps:
            self._steps[r.step].record = r
        for q in chunk.requests:
            self._request_event(q)

    # -- steps -------------------------------------------------------------------------
    def _emit_steps(self, final: bool) -> Generator[None, None, None]:
        """Emit the steps that are complete (all, when ``final``); yields after each step."""
        ready = sorted(i for i, b in self._steps.items() if b.record is not None and b.committed)
        if final:
            ready = sorted(self._steps)
        elif len(self._steps) > self.max_pending_steps:
            extra = sorted(self._steps)[:len(self._steps) - self.max_pending_steps]
            ready = sorted(set(ready) | set(extra))
        for i in ready:
            yield from self._emit_step(i, self._steps.pop(i))

    def _wall(self, t: int) -> int:
        return t + self._offset

    def _emit_step(self, index: int, b: StepBuf) -> Generator[None, None, None]:
        """The step's spans (steps.py), if it is sampled; yields after each span (a slice unit)."""
        plans = [s for s in b.host if s.phase == _PLAN]
        if b.record is None and not b.device and len(plans) == len(b.host):
            return  # only idle ticks' plans (nothing launched) carry this index
        if len(plans) > 1:  # idle ticks planned nothing under this index before it launched
            last = max(plans, key=lambda s: s.t0)
            b.host = [s for s in b.host if s.phase != _PLAN or s is last]
        self.steps_seen += 1
        compute = sorted((d for d in b.device if d.op in COMPUTE_OPS), key=lambda d: d.t0)
        bubble = 0
        prev_end = self._last_compute_end
        for d in compute:
            if prev_end is not None:
                bubble = max(bubble, self._reqs.busy_gap(prev_end, d.t0))
            prev_end = d.t1 if prev_end is None else max(prev_end, d.t1)
        if compute:
            self._last_compute_end = prev_end
        unexpected = [w for w in b.waits if not w.expected]
        reasons = []
        if index % self.every_n_steps == 0:
            reasons.append("periodic")
        if bubble > self.bubble_threshold_ns:
            reasons.append("bubble")
        if unexpected:
            reasons.append("unexpected_wait")
        times = [s.t0 for s in b.host] + [d.t0 for d in b.device] + [w.t0 for w in b.waits]
        ends = [s.t1 for s in b.host] + [d.t1 for d in b.device] + [w.t1 for w in b.waits]
        if times:
            self._exported_until = max(self._exported_until, max(ends))
        if not reasons or not times:
            return
        t0, t1 = min(times), max(ends)
        sampled = {ATTR + "sampled_because": ",".join(reasons), ATTR + "bubble_ns": int(bubble),
                   ATTR + "unexpected_waits": len(unexpected)}
        root = yield from step_spans(self._otel(), index, b, (t0, t1), sampled, self._wall)
        self._emitted.append((t0, t1, root))
        self.steps_exported += 1

    # -- requests ----------------------------------------------------------------------
    def _request_event(self, q: RequestRecord) -> None:
        done = self._reqs.event(q)
        for req_id, b in done:
            self._emit_request(req_id, b)
        if done:
            self._forget_steps(max((b.end for _, b in done if b.end is not None), default=self._exported_until))

    def _emit_requests(self, final: bool) -> Generator[None, None, None]:
        """Emit the requests whose steps are exported (all, when ``final``); yields after each."""
        ready = self._reqs.ready(self._exported_until, final)
        for req_id, b in ready:
            self._emit_request(req_id, b)
            yield
        if ready:
            self._forget_steps(max((b.end for _, b in ready if b.end is not None), default=self._exported_until))

    def _emit_request(self, req_id: int, b: RequestBuf) -> None:
        from opentelemetry import trace
        from opentelemetry.context import Context
        from opentelemetry.trace import Status, StatusCode

        tracer = self._otel()   # sets self.model from the header if it was not given
        named = self._reqs.span(req_id, b, self.operation, self.model)
        if named is None:
            return
        name, attrs = named
        e = b.events
        start = (e.get("arrival") or e.get("admitted"))[0]
        active_from = (e.get("admitted") or e.get("arrival"))[0]
        links = [trace.Link(ctx) for t0, t1, ctx in self._emitted if t1 >= active_from and t0 <= b.end]
        attrs[ATTR + "linked_steps"] = len(links)
        span = tracer.start_span(name, context=Context(), kind=trace.SpanKind.SERVER,
                                 start_time=self._wall(start), attributes=attrs, links=links)
        if "error.type" in attrs:
            span.set_status(Status(StatusCode.ERROR, str(attrs["error.type"])))
        for event in ("admitted", "first_token"):
            if event in e and e[event][0] <= b.end:
                span.add_event(event, timestamp=self._wall(e[event][0]))
        span.end(end_time=self._wall(b.end))
        self.requests_exported += 1

    def _forget_steps(self, ended: int) -> None:
        """Drop step spans older than every request still open (or than ``ended``, the last
        emitted request's end, when none is): they can no longer be linked. Only after a whole
        batch of requests is emitted: a batch's later requests are no longer open, yet link."""
        oldest = self._reqs.oldest_open(ended)
        while self._emitted and self._emitted[0][1] < oldest:
            self._emitted.popleft()


def export_trace(trace: Trace, sink: OtelSink | None = None, **kwargs) -> OtelSink:
    """Export a whole loaded trace through an ``OtelSink`` (built from ``kwargs`` if not given)."""
    sink = sink or OtelSink(**kwargs)
    sink.open(trace.header)
    sink.write(Chunk(seq=1, **{k: list(getattr(trace, k)) for k in RECORD_KINDS}))
    sink.close()
    return sink
