"""``/health``, ``/metrics`` (Prometheus) and ``/v1/trace/recent`` (the dashboard's live mode):
how the engine is doing, read without disturbing it.

With an API key, ``/metrics`` and ``/v1/trace/recent`` need it (the middleware refuses them
without); ``/health`` answers anyone, but a caller without the key learns only the status
(its code says the same), not the model, counts or failures.
"""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from photon_trace.telemetry.trace.records import RECORD_KINDS

from photon_trace.server.errors import NOT_FOUND, APIError, bad_request
from photon_trace.server.metrics import CONTENT_TYPE
from photon_trace.server.state import StateDep

router = APIRouter()


@router.get("/health")
async def health(st: StateDep, request: Request) -> JSONResponse:
    loop = st.loop
    e = loop.engine
    status = loop.status
    code = 200 if status == "ok" else 503
    if not request.state.key_ok:
        return JSONResponse({"status": status}, code)
    body = {"status": status, "model": st.model_name, "error": loop.public_error, "restarts": loop.restarts}
    if e is not None:
        stats = e.stats()
        body.update(running=stats.running, waiting=stats.waiting,
                    kv_pages_used=stats.kv_pages_used, streams=loop.active_requests,
                    idle_checks=loop.idle_checks, invariants=loop.invariant_error or "ok")
    return JSONResponse(body, code)


# Plain functions, so FastAPI runs them on its thread pool: rendering the metrics and
# copying the live trace out stay off the event loop.
@router.get("/metrics")
def metrics(st: StateDep) -> Response:
    return Response(st.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/v1/trace/recent")
def trace_recent(st: StateDep, cursor: str = "0") -> JSONResponse:
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
    return JSONResponse(body)
