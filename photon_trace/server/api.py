"""The FastAPI app: OpenAI-compatible endpoints over one engine thread.

    app = create_app(lambda tracer: Engine(model="tiny", backend="cpu", tracer=tracer),
                     model_name="tiny", api_key=None)

Web handlers are asynchronous and never mutate the engine: they validate, post
the request to the engine thread (``EngineLoop``, through ``ServerState``), read
its updates from a per-request asyncio queue and the engine's counters from its
per-tick ``stats()`` snapshot. Bodies are parsed by hand (after the
API-key check) so every bad input, malformed JSON included, gets an OpenAI-style 4xx.
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from photon_trace.engine.constraints import ConstraintError, ResponseFormat
from photon_trace.telemetry.records import RECORD_KINDS

from photon_trace.server import logprobs, protocol, validate
from photon_trace.server.errors import NOT_FOUND, SERVER_ERROR, APIError, bad_request, error_body
from photon_trace.server.metrics import CONTENT_TYPE
from photon_trace.server.state import ClientGone, ServerState, parse
from photon_trace.server.streaming import TextStream, chat_stream_parts, completion_stream_parts, sse_events

log = logging.getLogger(__name__)

COMPLETION_DEFAULT_MAX_TOKENS = 16    # OpenAI's default for /v1/completions
CHAT_DEFAULT_MAX_TOKENS = 256         # chat's default: this, clipped to what the context leaves
SKILL_FIELDS = {"point": 2, "detect": 4}  # tokens per point / box


def create_app(engine: Any, *, api_key: str | None = None, model_name: str | None = None,
               otlp: bool = False, sinks: tuple = (), live_chunks: int = 120) -> FastAPI:
    """The server app.

    ``engine``: an ``Engine`` (the caller owns and closes it; its tracer, if a
    ``RecordingTracer``, feeds the live and device metrics), or a callable
    ``factory(tracer) -> Engine`` that the app calls on its engine thread at start-up
    with the server's ``RecordingTracer`` (the app then closes it at shutdown).
    ``api_key``: required as ``Authorization: Bearer KEY`` on ``/v1/*`` when set.
    ``otlp``: also export request and sampled step spans over OTLP (standard
    ``OTEL_*`` variables); ``sinks``: more recorder sinks (an ``OtelSink`` with its own
    exporter, a trace file writer). ``live_chunks``: flushes (~0.5 s each) ``/v1/trace/recent`` keeps.
    """
    st = ServerState(engine, api_key=api_key, model_name=model_name, otlp=otlp, sinks=tuple(sinks),
                     live_chunks=live_chunks)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await asyncio.to_thread(st.start)
        try:
            yield
        finally:
            await asyncio.to_thread(st.stop)

    app = FastAPI(title="photon_trace", lifespan=lifespan)
    app.state.server = st

    def reply(request: Request, body: Any, status: int = 200) -> JSONResponse:
        st.count(request, status)
        return JSONResponse(body, status)

    @app.exception_handler(APIError)
    async def api_error(request: Request, e: APIError):
        return reply(request, e.body(), e.status)

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, e: ClientGone):
        st.count(request, 499)
        return Response(status_code=499)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        kind = NOT_FOUND if e.status_code == 404 else "invalid_request_error"
        return reply(request, error_body(str(e.detail), kind), e.status_code)

    @app.exception_handler(Exception)
    async def server_error(request: Request, e: Exception):
        log.exception("photon_trace: unhandled error on %s", request.url.path)
        return reply(request, error_body(f"internal error: {type(e).__name__}", SERVER_ERROR), 500)

    # -- generation ---------------------------------------------------------------------
    @app.post("/v1/completions")
    async def completions(request: Request):
        st.check_key(request)
        body = await parse(request, protocol.CompletionRequest)
        validate.check_model(body.model, st.limits)
        validate.check_n(body.n)
        if body.echo:
            raise bad_request("echo is not supported", "echo", "unsupported_value")
        ids = validate.prompt_ids(body.prompt, st.tokenizer, st.limits.vocab_size)
        return await generate(request, body, ids, "prompt", COMPLETION_DEFAULT_MAX_TOKENS, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        st.check_key(request)
        body = await parse(request, protocol.ChatCompletionRequest)
        validate.check_model(body.model, st.limits)
        validate.check_n(body.n)
        ids = validate.chat_prompt(body.messages, st.tokenizer)
        if body.max_tokens is None:
            body.max_tokens = body.max_completion_tokens
        return await generate(request, body, ids, "messages", CHAT_DEFAULT_MAX_TOKENS, chat=True)

    async def generate(request: Request, body, ids: list[int], prompt_param: str, default_max: int,
                       *, chat: bool):
        validate.check_context(len(ids), st.limits, prompt_param)
        top = logprobs.requested(chat, body.logprobs, getattr(body, "top_logprobs", None))
        params = validate.sampling_params(
            temperature=body.temperature, top_p=body.top_p, top_k=body.top_k, seed=body.seed, stop=body.stop,
            max_tokens=validate.max_tokens(body.max_tokens, len(ids), st.limits, default_max),
            ignore_eos=body.ignore_eos, logprobs=top, defaults=st.sampling_defaults)
        fmt = validate.response_format(body.response_format)
        stream = await st.run(ids, params, fmt, deltas=body.stream)
        rid = protocol.new_id("chatcmpl" if chat else "cmpl")
        shape = logprobs.chat_logprobs if chat else logprobs.completion_logprobs
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            parts = chat_stream_parts if chat else completion_stream_parts
            chunk, usage, first = parts(rid, st.model_name, include_usage)
            st.count(request, 200)
            events = sse_events(stream, abort=st.loop.abort, text=TextStream(st.tokenizer, params.stop),
                                chunk=chunk, usage=usage, first=first,
                                logprobs=None if top is None else logprobs.StreamLogprobs(st.tokenizer, chat))
            return StreamingResponse(events, media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        out = await st.output(request, stream)
        lps = None if out.logprobs is None else shape(st.tokenizer, out.logprobs)
        if chat:
            return reply(request, protocol.chat_body(rid, st.model_name, out, lps))
        return reply(request, protocol.completion_body(rid, st.model_name, out, out.text, lps))

    # -- spatial skills -------------------------------------------------------------------
    async def skill(request: Request, kind: str):
        st.check_key(request)
        body = await parse(request, protocol.SkillRequest)
        validate.check_model(body.model, st.limits)
        if body.image is not None:
            raise bad_request("image input is not supported: the engine's models are text-only; describe the "
                              "target in `object`", "image", "unsupported_value")
        if not body.object and not body.prompt:
            raise bad_request("`object` (what to find) or `prompt` is required", "object")
        try:
            fmt = ResponseFormat(kind, max_count=body.max_objects)
        except ConstraintError as e:
            raise bad_request(str(e), "max_objects") from None
        ids = st.tokenizer.encode(body.prompt or f"{kind}: {body.object}\n", add_special_tokens=True)
        validate.check_context(len(ids), st.limits, "prompt" if body.prompt else "object")
        budget = SKILL_FIELDS[kind] * fmt.max_count + 1     # every field of max_count answers, then EOS
        if len(ids) + budget > st.limits.max_context:
            raise bad_request(f"{fmt.max_count} answers need {budget} tokens; with the prompt "
                              f"({len(ids)}) that exceeds the context of {st.limits.max_context}",
                              "max_objects", validate.CONTEXT_EXCEEDED)
        temperature = 0.0 if body.temperature is None else body.temperature
        params = validate.sampling_params(temperature=temperature, top_p=body.top_p, seed=body.seed,
                                          max_tokens=budget)
        stream = await st.run(ids, params, fmt, deltas=False)
        out = await st.output(request, stream)
        return reply(request, protocol.skill_body(protocol.new_id(kind), kind, st.model_name, out))

    @app.post("/v1/point")
    async def point(request: Request):
        return await skill(request, "point")

    @app.post("/v1/detect")
    async def detect(request: Request):
        return await skill(request, "detect")

    # -- information ------------------------------------------------------------------------
    @app.get("/v1/models")
    async def models(request: Request):
        st.check_key(request)
        return reply(request, protocol.models_body(st.model_name, st.created, st.limits.max_context))

    @app.get("/health")
    async def health(request: Request):
        loop = st.loop
        e = loop.engine
        body = {"status": "ok" if loop.alive else "unavailable", "model": st.model_name,
                "error": repr(loop.error) if loop.error else None}
        if e is not None:
            stats = e.stats()
            body.update(running=stats.running, waiting=stats.waiting,
                        kv_pages_used=stats.kv_pages_used, streams=loop.active_requests,
                        idle_checks=loop.idle_checks, invariants=loop.invariant_error or "ok")
        return reply(request, body, 200 if loop.alive else 503)

    @app.get("/metrics")
    def metrics(request: Request):
        st.count(request, 200)
        return Response(st.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/trace/recent")
    def trace_recent(request: Request, cursor: str = "0"):
        """Trace records flushed after ``cursor`` (start at 0), rows as in a trace file's chunk lines,
        and the cursor to send next time: the dashboard's live mode."""
        st.check_key(request)
        try:
            after = int(cursor)
        except ValueError:
            after = -1
        if after < 0:
            raise bad_request("cursor must be a non-negative integer", "cursor")
        if st.tracer is None:
            raise APIError(404, "this server's engine records no trace", type=NOT_FOUND, code="no_trace")
        trace, nxt = st.live.recent(after)
        body = {"header": trace.header, "cursor": nxt}
        for kind in RECORD_KINDS:
            body[kind] = [list(r) for r in getattr(trace, kind)]
        return reply(request, body)

    return app
