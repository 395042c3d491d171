"""What the routes share: the engine thread, the tracer's sinks, the metrics, the limits,
and the request path through them (tokenize, submit, wait, abort on disconnect); the
routes get it through ``StateDep``."""
from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Request

from photon_trace.engine.constraints import ConstraintError, ResponseFormat
from photon_trace.engine.outputs import RequestOutput
from photon_trace.engine.params import SamplingParams
from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.recording.sinks import LiveBuffer

from photon_trace.server import validate
from photon_trace.server.device_stats import DeviceStats
from photon_trace.server.errors import UNAVAILABLE, APIError, bad_request
from photon_trace.server.loop import EngineLoop, RequestStream
from photon_trace.server.metrics import ServerMetrics
from photon_trace.server.protocol import finish_reason
from photon_trace.server.served_engine import EngineSource
from photon_trace.server.vllm_metrics import VllmMetrics

OFF_LOOP_CHARS = 4096     # prompts longer than this are tokenized on a worker thread

T = TypeVar("T")


class ClientGone(Exception):
    """The client of a non-streamed request disconnected; its request was aborted."""


class ServerState:
    """The engine thread, the tracer's sinks, the metrics and the limits: what the routes share."""

    def __init__(self, engine: EngineSource, *, model_name: str | None, otlp: bool,
                 sinks: tuple, live_chunks: int) -> None:
        self.model_name = model_name
        self.created = int(time.time())
        self.live = LiveBuffer(max_chunks=live_chunks)
        if hasattr(engine, "step"):          # an engine built by the caller, with its own tracer
            self.tracer = engine.tracer if isinstance(engine.tracer, RecordingTracer) else None
            factory = engine
        else:                                # a factory: it gets our tracer, on the engine thread
            self.tracer = RecordingTracer()
            factory = functools.partial(engine, self.tracer)
        self.loop = EngineLoop(factory, on_added=self._added, on_tokens=self._tokens,
                               on_finished=self._finished, on_failed=self._failed)
        self.metrics = ServerMetrics(self.loop)
        self.vllm_metrics: VllmMetrics | None = None     # made at start, once the model's name is known
        self.stats = DeviceStats(self.metrics, self.loop.idle_intervals)
        self._sinks = [self.live, self.stats, *sinks]
        if otlp:
            from photon_trace.telemetry.export.otlp.sink import OtelSink
            self._sinks.append(OtelSink(model=model_name))
        # Sinks that label request spans (OtelSink): told each request's parameters and outcome.
        self._span_sinks = [s for s in self._sinks if hasattr(s, "request_attributes")]
        self.limits: validate.Limits | None = None
        self._compile_lock = threading.Lock()

    # -- lifecycle (off the event loop: building an engine takes seconds) -------------
    def start(self) -> None:
        self.loop.start()
        engine = self.loop.engine
        cfg = engine.config
        if self.model_name is None:
            self.model_name = cfg.model if "/" not in cfg.model else Path(cfg.model).name
        self.tokenizer = engine.tokenizer
        self.sampling_defaults = dict(getattr(engine, "sampling_defaults", {}))   # generation_config.json's
        self.limits = validate.Limits(self.model_name, cfg.max_context, engine.model_config.vocab_size)
        self.vllm_metrics = VllmMetrics(self.metrics.registry, self.loop, self.model_name, cfg.max_context)
        if self.tracer is not None:
            self.tracer.describe(model=self.model_name, backend=cfg.resolved_backend(),
                                 settings=asdict(cfg))
            # Attached once the engine has described itself, so every sink opens with the
            # whole header (an OTLP resource cannot change after it is made).
            for sink in self._sinks:
                self.tracer.add_sink(sink)

    def stop(self) -> None:
        self.loop.stop()

    # -- engine-thread callbacks ---------------------------------------------------------------
    def _added(self, req_id: int, prompt: list[int], params: SamplingParams, span: dict | None) -> None:
        if self.vllm_metrics is not None:
            self.vllm_metrics.added(req_id, len(prompt), params.max_tokens)
        if span:
            for sink in self._span_sinks:
                sink.request_attributes(req_id, span)

    def _tokens(self, deltas: list) -> None:
        if self.vllm_metrics is not None:
            self.vllm_metrics.tokens(deltas)

    def _finished(self, out: RequestOutput) -> None:
        self.metrics.request_finished(out)
        if self.vllm_metrics is not None:
            self.vllm_metrics.finished(out)
        for sink in self._span_sinks:
            sink.request_attributes(out.req_id, {"gen_ai.response.finish_reasons": [finish_reason(out)]},
                                    final=True)

    def _failed(self, req_id: int) -> None:
        if self.vllm_metrics is not None:
            self.vllm_metrics.failed(req_id)
        for sink in self._span_sinks:
            sink.request_attributes(req_id, {"gen_ai.response.finish_reasons": ["error"],
                                             "error.type": "engine_failure"}, final=True)

    def span_info(self, response_id: str, operation: str, params: SamplingParams,
                  fmt: ResponseFormat | None, skill: str | None = None) -> dict | None:
        """A request's GenAI span attributes known before it runs (None: no sink wants them)."""
        if not self._span_sinks:
            return None
        attrs = {"gen_ai.operation.name": operation, "gen_ai.response.id": response_id,
                 "gen_ai.request.max_tokens": params.max_tokens, "gen_ai.request.temperature": params.temperature,
                 "gen_ai.request.top_p": params.top_p, "gen_ai.response.model": self.model_name,
                 "gen_ai.output.type": "json" if fmt is not None and fmt.kind in ("json_object", "json_schema")
                 else "text"}
        if skill is not None:
            attrs["photon_trace.skill"] = skill
        if params.top_k:
            attrs["gen_ai.request.top_k"] = params.top_k
        if params.seed is not None:
            attrs["gen_ai.request.seed"] = params.seed
        if params.stop:
            attrs["gen_ai.request.stop_sequences"] = list(params.stop)
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(params, name, 0.0)
            if value:
                attrs[f"gen_ai.request.{name}"] = value
        return attrs

    # -- the request path ------------------------------------------------------------------
    async def tokenize(self, text: str) -> list[int]:
        """``text``'s token ids, with BOS and the like."""
        return await off_loop(len(text), self.tokenizer.encode, text, True)

    def precompile(self, fmt: ResponseFormat | None) -> None:
        """Compile ``fmt``'s grammar into the engine's cache on a worker thread, so the engine
        thread's add_request finds it ready instead of stalling every request on a compile."""
        if fmt is None or not fmt.is_constrained:
            return
        with self._compile_lock:   # one creator of the engine's (lazily built) compiler
            self.loop.engine.compile_format(fmt)

    async def run(self, prompt: list[int], params, fmt: ResponseFormat | None, *, deltas: bool,
                  span: dict | None = None, format_param: str = "response_format") -> RequestStream:
        """Validate ``fmt`` (a 400 names ``format_param``, the field that asked for it), hand the
        request to the engine thread; the stream its updates arrive on."""
        try:
            await asyncio.to_thread(self.precompile, fmt)
        except ConstraintError as e:
            raise bad_request(str(e), format_param, "invalid_response_format") from None
        stream = RequestStream(deltas=deltas)
        fut = self.loop.submit(prompt, params, fmt, stream, span)
        try:
            await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            fut.add_done_callback(functools.partial(self._abort_if_added, stream))
            raise
        except ConstraintError as e:
            raise bad_request(str(e), format_param, "invalid_response_format") from None
        except ValueError as e:
            code = validate.CONTEXT_EXCEEDED if "context" in str(e) else None
            raise bad_request(str(e), code=code) from None
        except RuntimeError as e:   # the loop's own words: no engine detail, no traceback
            raise APIError(503, str(e), type=UNAVAILABLE) from None
        return stream

    def _abort_if_added(self, stream: RequestStream, fut) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self.loop.abort(stream)

    async def output(self, request: Request, stream: RequestStream) -> RequestOutput:
        """The finished output of a non-streamed request (its only update); aborts it if the
        client goes away first."""
        getter = asyncio.ensure_future(stream.queue.get())
        watcher = asyncio.ensure_future(_until_disconnected(request))
        try:
            await asyncio.wait((getter, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not getter.done():
                getter.cancel()
                self.loop.abort(stream)
        if not getter.done() or getter.cancelled():
            raise ClientGone
        update = getter.result()
        if update.error is not None:
            raise APIError(503, update.error, type=UNAVAILABLE)
        return update.output

    def count(self, scope: dict, status: int) -> None:
        route = scope.get("route")
        self.metrics.http_requests.labels(getattr(route, "path", "other"), str(status)).inc()


async def _until_disconnected(request: Request) -> None:
    # The body has been read, so the next ASGI message can only be the disconnect: wait for
    # it (as Starlette's StreamingResponse does) instead of polling.
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def off_loop(size: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, on a worker thread when ``size`` (characters) is large."""
    if size > OFF_LOOP_CHARS:   # a long prompt must not stall every other request
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


def state_of(app: FastAPI) -> ServerState:
    """The one place the app's shared state is read (``create_app`` puts it there)."""
    return app.state.server


async def server_state(request: Request) -> ServerState:
    # async: FastAPI would run a plain function on its thread pool for every request
    return state_of(request.app)


StateDep = Annotated[ServerState, Depends(server_state)]   # a route's ``st: StateDep``
