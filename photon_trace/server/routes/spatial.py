"""``/v1/point`` and ``/v1/detect``: where an object is, as points or boxes, generated under
the engine's spatial constraints."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from photon_trace.engine.constraints import ConstraintError, ResponseFormat

from photon_trace.server import protocol, validate
from photon_trace.server.body import parse
from photon_trace.server.errors import bad_request
from photon_trace.server.state import ServerState, StateDep

SKILL_FIELDS = {"point": 2, "detect": 4}  # tokens per point / box

router = APIRouter()
BODIES = {"/v1/point": protocol.SkillRequest, "/v1/detect": protocol.SkillRequest}


@router.post("/v1/point")
async def point(request: Request, st: StateDep) -> JSONResponse:
    return await skill(request, st, "point")


@router.post("/v1/detect")
async def detect(request: Request, st: StateDep) -> JSONResponse:
    return await skill(request, st, "detect")


async def skill(request: Request, st: ServerState, kind: str) -> JSONResponse:
    """Answer the skill request in ``request``'s body with ``kind`` ("point" or "detect")."""
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
    ids = await st.tokenize(body.prompt or f"{kind}: {body.object}\n")
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
    return JSONResponse(protocol.skill_body(rid, kind, st.model_name, out))
