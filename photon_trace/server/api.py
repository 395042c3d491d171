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
from photon_trace.telemetry.trace.records import RECORD_KINDS

from photon_trace.server import logprobs, protocol, validate
from photon_trace.server.body import parse
from photon_trace.server.errors import NOT_FOUND, APIError, bad_request, error_body
from photon_trace.server.middleware import DEFAULT_MAX_BODY_BYTES, LOOPBACK_HOSTS, Guard
from photon_trace.server.metrics import CONTENT_TYPE
from photon_trace.server.openapi import document_bodies
from photon_trace.server.state import ClientGone, ServerState
from photon_trace.server.streaming import TextStream, chat_stream_parts, completion_stream_parts, sse_events

log = logging.getLogger(__name__)

COMPLETION_DEFAULT_MAX_TOKENS = 16    # OpenAI's default for /v1/completions
CHAT_DEFAULT_MAX_TOKENS = 256         # chat's default: this, clipped to what the context leaves
SKILL_FIELDS = {"point": 2, "detect": 4}  # tokens per point / box
OFF_LOOP_CHARS = 4096                 # prompts longer than this are tokenized on a worker thread


def create_app(engine: Any, *, api_key: str | None = None, model_name: str | None = None,
               otlp: bool = False, sinks: tuple = (), live_chunks: int = 120,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               allowed_hosts: frozenset[str] | set[str] | None = None) -> FastAPI:
    """The server app.

    ``engine``: an ``Engine`` (the caller owns and closes it; its tracer, if a
    ``RecordingTracer``, feeds the live and device metrics), or a callable
    ``factory(tracer) -> Engine`` that the app calls on its engine thread at start-up
    with the server's ``RecordingTracer`` (the app then closes it at shutdown, and
    calls it again to replace an engine whose device died).
    ``api_key``: required as ``Authorization: Bearer KEY`` on ``/v1/*`` when set; an
    empty key is an error, not "no key".
    ``otlp``: also export request and sampled step spans over OTLP (standard
    ``OTEL_*`` variables); ``sinks``: more recorder sinks (an ``OtelSink`` with its own
    exporter, a trace file writer). ``live_chunks``: flushes (~0.5 s each) ``/v1/trace/recent`` keeps.
    ``max_body_bytes``: larger request bodies get a 413 before they are parsed.
    ``allowed_hosts``: the ``Host`` names answered without an API key (default: the
    loopback names); with a key every host is answered.
    """
    if api_key is not None and not api_key.strip():
        raise ValueError("the API key is empty: set a non-empty key, or none at all")
    st = ServerState(engine, model_name=model_name, otlp=otlp, sinks=tuple(sinks),
                     live_chunks=live_chunks)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await asyncio.to_thread(st.start)
        try:
            yield
        finally:
            await asyncio.to_thread(st.stop)

    app = FastAPI(title="photon_trace", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.server = st
    hosts = None if api_key is not None else frozenset(h.lower() for h in (allowed_hosts or LOOPBACK_HOSTS))
    app.add_middleware(Guard, max_body_bytes=max_body_bytes, allowed_hosts=hosts, api_key=api_key, count=st.count)

    def reply(body: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(body, status)

    @app.exception_handler(APIError)
    async def api_error(request: Request, e: APIError):
        if e.status >= 500:
            rid = request.state.request_id
            log.warning("photon_trace: request %s: %d %s", rid, e.status, e.message)
            e = APIError(e.status, f"{e.message} (request id {rid})", type=e.type, param=e.param, code=e.code)
        return reply(e.body(), e.status)

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, e: ClientGone):
        return Response(status_code=499)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        kind = NOT_FOUND if e.status_code == 404 else "invalid_request_error"
        return JSONResponse(error_body(str(e.detail), kind), e.status_code, headers=e.headers)

    async def off_loop(size: int, fn, *args):
        if size > OFF_LOOP_CHARS:   # a long prompt must not stall every other request
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    async def tokenize(text: str) -> list[int]:
        return await off_loop(len(text), st.tokenizer.encode, text, True)   # with BOS and the like

    # -- generation ---------------------------------------------------------------------
    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await parse(await request.body(), protocol.CompletionRequest, protocol.UNSUPPORTED)
        validate.check_model(body.model, st.limits)
        validate.check_n(body.n)
        if body.echo:
            raise bad_request("echo is not supported", "echo", "unsupported_value")
        prompt = validate.prompt_text(body.prompt)
        ids = (await tokenize(prompt) if prompt is not None
               else validate.prompt_ids(body.prompt, st.limits.vocab_size))
        return await generate(request, body, ids, "prompt", COMPLETION_DEFAULT_MAX_TOKENS, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await parse(await request.body(), protocol.ChatCompletionRequest, protocol.UNSUPPORTED)
        validate.check_model(body.model, st.limits)
        validate.check_n(body.n)
        size = sum(len(str(m.content or "")) for m in body.messages)
        ids = await off_loop(size, validate.chat_prompt, body.messages, st.tokenizer)
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
            ignore_eos=bool(body.ignore_eos), presence_penalty=body.presence_penalty,
            frequency_penalty=body.frequency_penalty, logprobs=top, vocab_size=st.limits.vocab_size,
            defaults=st.sampling_defaults)
        fmt = validate.response_format(body.response_format)
        rid = protocol.new_id("chatcmpl" if chat else "cmpl")
        stream = await st.run(ids, params, fmt, deltas=bool(body.stream), span=st.span_info(
            rid, "chat" if chat else "text_completion", params, fmt))
        shape = logprobs.chat_logprobs if chat else logprobs.completion_logprobs
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            parts = chat_stream_parts if chat else completion_stream_parts
            chunk, usage, first = parts(rid, st.model_name, include_usage)
            events = sse_events(stream, abort=st.loop.abort, text=TextStream(st.tokenizer, params.stop),
                                chunk=chunk, usage=usage, first=first, request_id=request.state.request_id,
                                logprobs=None if top is None else logprobs.StreamLogprobs(st.tokenizer, chat))
            return StreamingResponse(events, media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        out = await st.output(request, stream)
        lps = None if out.logprobs is None else shape(st.tokenizer, out.logprobs)
        if chat:
            return reply(protocol.chat_body(rid, st.model_name, out, lps))
        return reply(protocol.completion_body(rid, st.model_name, out, out.text, lps))

    # -- spatial skills -------------------------------------------------------------------
    async def skill(request: Request, kind: str):
        body = await parse(await request.body(), protocol.SkillRequest)
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
        ids = await tokenize(body.prompt or f"{kind}: {body.object}\n")
        validate.check_context(len(ids), st.limits, "prompt" if body.prompt else "object")
        budget = SKILL_FIELDS[kind] * fmt.max_count + 1     # every field of max_count answers, then EOS
        if len(ids) + budget > st.limits.max_context:
            raise bad_request(f"{fmt.max_count} answers need {budget} tokens; with the prompt "
                              f"({len(ids)}) that exceeds the context of {st.limits.max_context}",
                              "max_objects", validate.CONTEXT_EXCEEDED)
        temperature = 0.0 if body.temperature is None else body.temperature
        params = validate.sampling_params(temperature=temperature, top_p=body.top_p, seed=body.seed,
                                          max_tokens=budget)
        rid = protocol.new_id(kind)
        # a skill is a text completion in the conventions' well-known operation names
        stream = await st.run(ids, params, fmt, deltas=False,
                              span=st.span_info(rid, "text_completion", params, fmt, skill=kind))
        out = await st.output(request, stream)
        return reply(protocol.skill_body(rid, kind, st.model_name, out))

    @app.post("/v1/point")
    async def point(request: Request):
        return await skill(request, "point")

    @app.post("/v1/detect")
    async def detect(request: Request):
        return await skill(request, "detect")

    # -- information ------------------------------------------------------------------------
    @app.get("/v1/models")
    async def models(request: Request):
        return reply(protocol.models_body(st.model_name, st.created, st.limits.max_context))

    @app.get("/v1/models/{model_id:path}")
    async def model(request: Request, model_id: str):
        validate.check_model(model_id, st.limits)
        return reply(protocol.model_body(st.model_name, st.created, st.limits.max_context))

    @app.get("/health")
    async def health(request: Request):
        loop = st.loop
        e = loop.engine
        status = loop.status
        body = {"status": status, "model": st.model_name, "error": loop.public_error, "restarts": loop.restarts}
        if e is not None:
            stats = e.stats()
            body.update(running=stats.running, waiting=stats.waiting,
                        kv_pages_used=stats.kv_pages_used, streams=loop.active_requests,
                        idle_checks=loop.idle_checks, invariants=loop.invariant_error or "ok")
        return reply(body, 200 if status == "ok" else 503)

    @app.get("/metrics")
    def metrics(request: Request):
        return Response(st.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/trace/recent")
    def trace_recent(request: Request, cursor: str = "0"):
        """Trace records flushed after ``cursor`` (start at 0), rows as in a trace file's chunk lines,
        and the cursor to send next time: the dashboard's live mode."""
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
        return reply(body)

    document_bodies(app, {"/v1/completions": protocol.CompletionRequest,
                          "/v1/chat/completions": protocol.ChatCompletionRequest,
                          "/v1/point": protocol.SkillRequest, "/v1/detect": protocol.SkillRequest})
    return app
