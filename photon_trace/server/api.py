"""The FastAPI app: OpenAI-compatible endpoints over one engine thread.

    app = create_app(lambda tracer: Engine(model="tiny", backend="cpu", tracer=tracer),
                     model_name="tiny", api_key=None)

Web handlers (``routes/``) are asynchronous and never mutate the engine: they validate,
post the request to the engine thread (``EngineLoop``, through ``ServerState``), read
its updates from a per-request asyncio queue and the engine's counters from its
per-tick ``stats()`` snapshot. Bodies are parsed by hand (after the
API-key check) so every bad input, malformed JSON included, gets an OpenAI-style 4xx.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from photon_trace.server.errors import NOT_FOUND, APIError, error_body
from photon_trace.server.middleware import DEFAULT_MAX_BODY_BYTES, LOOPBACK_HOSTS, Guard
from photon_trace.server.openapi import document_bodies
from photon_trace.server.routes import BODIES, ROUTERS
from photon_trace.server.served_engine import EngineSource
from photon_trace.server.state import ClientGone, ServerState, state_of

log = logging.getLogger(__name__)


def create_app(engine: EngineSource, *, api_key: str | None = None, model_name: str | None = None,
               otlp: bool = False, sinks: tuple = (), live_chunks: int = 120,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               allowed_hosts: frozenset[str] | set[str] | None = None) -> FastAPI:
    """The server app.

    ``engine``: an ``Engine`` (the caller owns and closes it; its tracer, if a
    ``RecordingTracer``, feeds the live and device metrics), or a callable
    ``factory(tracer) -> Engine`` that the app calls on its engine thread at start-up
    with the server's ``RecordingTracer`` (the app then closes it at shutdown, and
    calls it again to replace an engine whose device died). What the server uses of
    an engine: ``served_engine.ServedEngine``.
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
    app = FastAPI(title="photon_trace", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.server = st
    hosts = None if api_key is not None else frozenset(h.lower() for h in (allowed_hosts or LOOPBACK_HOSTS))
    app.add_middleware(Guard, max_body_bytes=max_body_bytes, allowed_hosts=hosts, api_key=api_key, count=st.count)
    app.add_exception_handler(APIError, api_error)
    app.add_exception_handler(ClientGone, client_gone)
    app.add_exception_handler(StarletteHTTPException, http_error)
    for router in ROUTERS:
        app.include_router(router)
    document_bodies(app, BODIES)
    return app


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    st = state_of(app)
    await asyncio.to_thread(st.start)   # building an engine takes seconds: off the event loop
    try:
        yield
    finally:
        await asyncio.to_thread(st.stop)


async def api_error(request: Request, e: APIError) -> JSONResponse:
    if e.status >= 500:
        rid = request.state.request_id
        log.warning("photon_trace: request %s: %d %s", rid, e.status, e.message)
        e = APIError(e.status, f"{e.message} (request id {rid})", type=e.type, param=e.param, code=e.code)
    return JSONResponse(e.body(), e.status)


async def client_gone(request: Request, e: ClientGone) -> Response:
    return Response(status_code=499)


async def http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
    kind = NOT_FOUND if e.status_code == 404 else "invalid_request_error"
    return JSONResponse(error_body(str(e.detail), kind), e.status_code, headers=e.headers)
