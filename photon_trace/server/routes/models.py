"""``/v1/models`` and ``/v1/models/{id}``: the one model this server serves."""
from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from photon_trace.server import protocol, validate
from photon_trace.server.state import StateDep

router = APIRouter()


@router.get("/v1/models")
async def models(st: StateDep) -> JSONResponse:
    return JSONResponse(protocol.models_body(st.model_name, st.created, st.limits.max_context))


@router.get("/v1/models/{model_id:path}")
async def model(model_id: str, st: StateDep) -> JSONResponse:
    validate.check_model(model_id, st.limits)
    return JSONResponse(protocol.model_body(st.model_name, st.created, st.limits.max_context))
