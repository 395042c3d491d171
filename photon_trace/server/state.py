"""What the routes share: the engine thread, the tracer's sinks, the metrics, the limits,
and the request path through them (submit, wait, abort on disconnect)."""
from __future__ import annotations

import asyncio
import functools
import json
import secrets
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ValidationError

from photon_trace.engine.constraints import ConstraintError, ResponseFormat
from photon_trace.engine.outputs import RequestOutput
from photon_trace.telemetry.recorder import RecordingTracer
from photon_trace.telemetry.sinks import LiveBuffer

from photon_trace.server import validate
from photon_trace.server.device_stats import DeviceStats
from photon_trace.server.errors import AUTHENTICATION, UNAVAILABLE, APIError, bad_request
from photon_trace.server.loop import EngineLoop, RequestStream
from photon_trace.server.metrics import ServerMetrics


class ClientGone(Exception):
    """The client of a non-streamed request disconnected; its request was aborted."""


class ServerState:
    """The engine thread, the tracer's sinks, the metrics and the limits: what the routes share."""

    def __init__(self, engine: Any, *, api_key: str | None, model_name: str | None, otlp: bool,
                 sinks: tuple, live_chunks: int) -> None:
        self.api_key = api_key
        self.model_name = model_name
        self.created = int(time.time())
        self.live = LiveBuffer(max_chunks=live_chunks)
        if hasattr(engine, "step"):          # an engine built by the caller, with its own tracer
            self.tracer = engine.tracer if isinstance(engine.tracer, RecordingTracer) else None
            factory = engine
        else:                                # a factory: it gets our tracer, on the engine thread
            self.tracer = RecordingTracer()
            factory = functools.partial(engine, self.tracer)
        self.loop = EngineLoop(factory, on_finished=self._finished)
        self.metrics = ServerMetrics(self.loop)
        self.stats = DeviceStats(self.metrics, self.loop.idle_intervals)
        if self.tracer is not None:
            self.tracer.add_sink(self.live)
            self.tracer.add_sink(self.stats)
            for sink in sinks:
                self.tracer.add_sink(sink)
            if otlp:
                from photon_trace.telemetry.otel import OtelSink
                self.tracer.add_sink(OtelSink(model=model_name))
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
        if self.tracer is not None:
            self.tracer.describe(model=self.model_name, backend=cfg.resolved_backend(),
                                 settings=asdict(cfg))

    def stop(self) -> None:
        self.loop.stop()

    def _finished(self, out: RequestOutput) -> None:
        self.metrics.request_finished(out)

    # -- the request path ------------------------------------------------------------------
    def check_key(self, request: Request) -> None:
        if self.api_key is None:
            return
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("x-api-key", "")
        if not secrets.compare_digest(token.encode(), self.api_key.encode()):
            raise APIError(401, "Incorrect or missing API key (send 'Authorization: Bearer KEY')",
                           type=AUTHENTICATION, code="invalid_api_key")

    def precompile(self, fmt: ResponseFormat | None) -> None:
        """Compile ``fmt``'s grammar into the engine's cache on a worker thread, so the engine
        thread's add_request finds it ready instead of stalling every request on a compile."""
        if fmt is None or not fmt.is_constrained:
            return
        with self._compile_lock:   # one creator of the engine's (lazily built) compiler
            self.loop.engine.compile_format(fmt)

    async def run(self, prompt: list[int], params, fmt: ResponseFormat | None, *, deltas: bool) -> RequestStream:
        """Validate ``fmt``, hand the request to the engine thread; the stream its updates arrive on."""
        try:
            await asyncio.to_thread(self.precompile, fmt)
        except ConstraintError as e:
            raise bad_request(str(e), "response_format", "invalid_response_format") from None
        stream = RequestStream(deltas=deltas)
        fut = self.loop.submit(prompt, params, fmt, stream)
        try:
            await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            fut.add_done_callback(self._abort_if_added)
            raise
        except ConstraintError as e:
            raise bad_request(str(e), "response_format", "invalid_response_format") from None
        except ValueError as e:
            code = validate.CONTEXT_EXCEEDED if "context" in str(e) else None
            raise bad_request(str(e), code=code) from None
        except RuntimeError as e:
            raise APIError(503, str(e), type=UNAVAILABLE) from None
        return stream

    def _abort_if_added(self, fut) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self.loop.abort(fut.result())

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
                self.loop.abort(stream.req_id)
        if not getter.done() or getter.cancelled():
            raise ClientGone
        update = getter.result()
        if update.error is not None:
            raise APIError(503, update.error, type=UNAVAILABLE)
        return update.output

    def count(self, request: Request, status: int) -> None:
        route = request.scope.get("route")
        self.metrics.http_requests.labels(getattr(route, "path", "other"), str(status)).inc()


async def _until_disconnected(request: Request) -> None:
    # The body has been read, so the next ASGI message can only be the disconnect: wait for
    # it (as Starlette's StreamingResponse does) instead of polling.
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def parse(request: Request, model: type[BaseModel]) -> Any:
    raw = await request.body()
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"the request body is not valid JSON: {e}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise bad_request("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        param = ".".join(str(x) for x in first["loc"]) or None
        raise bad_request(f"{param}: {first['msg']}" if param else first["msg"], param) from None
