"""``/v1/completions`` and ``/v1/chat/completions``: a prompt in, generated text out,
whole or streamed as server-sent events."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from photon_trace.server import logprobs, protocol, validate
from photon_trace.server.body import parse
from photon_trace.server.errors import bad_request
from photon_trace.server.state import ServerState, StateDep, off_loop
from photon_trace.server.streaming import TextStream, chat_stream_parts, completion_stream_parts, sse_events

COMPLETION_DEFAULT_MAX_TOKENS = 16    # OpenAI's default for /v1/completions
CHAT_DEFAULT_MAX_TOKENS = 256         # chat's default: this, clipped to what the context leaves

router = APIRouter()
BODIES = {"/v1/completions": protocol.CompletionRequest, "/v1/chat/completions": protocol.ChatCompletionRequest}


@router.post("/v1/completions")
async def completions(request: Request, st: StateDep) -> Response:
    body = await parse(await request.body(), protocol.CompletionRequest, protocol.UNSUPPORTED)
    validate.check_model(body.model, st.limits)
    validate.check_n(body.n)
    if body.echo:
        raise bad_request("echo is not supported", "echo", "unsupported_value")
    prompt = validate.prompt_text(body.prompt)
    ids = (await st.tokenize(prompt) if prompt is not None
           else validate.prompt_ids(body.prompt, st.limits.vocab_size))
    return await generate(request, st, body, ids, "prompt", COMPLETION_DEFAULT_MAX_TOKENS, chat=False)


@router.post("/v1/chat/completions")
async def chat_completions(request: Request, st: StateDep) -> Response:
    body = await parse(await request.body(), protocol.ChatCompletionRequest, protocol.UNSUPPORTED)
    validate.check_model(body.model, st.limits)
    validate.check_n(body.n)
    size = sum(len(str(m.content or "")) for m in body.messages)
    ids = await off_loop(size, validate.chat_prompt, body.messages, st.tokenizer)
    if body.max_tokens is None:
        body.max_tokens = body.max_completion_tokens
    return await generate(request, st, body, ids, "messages", CHAT_DEFAULT_MAX_TOKENS, chat=True)


async def generate(request: Request, st: ServerState,
                   body: protocol.CompletionRequest | protocol.ChatCompletionRequest, ids: list[int],
                   prompt_param: str, default_max: int, *, chat: bool) -> Response:
    """Run ``body`` on the prompt ``ids``; the whole answer, or its event stream when asked."""
    validate.check_context(len(ids), st.limits, prompt_param)
    top = logprobs.requested(chat, body.logprobs, getattr(body, "top_logprobs", None))
    params = validate.sampling_params(
        temperature=body.temperature, top_p=body.top_p, top_k=body.top_k, min_p=body.min_p, seed=body.seed,
        stop=body.stop, max_tokens=validate.max_tokens(body.max_tokens, len(ids), st.limits, default_max),
        ignore_eos=bool(body.ignore_eos), presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty, logprobs=top, vocab_size=st.limits.vocab_size,
        defaults=st.sampling_defaults)
    fmt, fmt_param = validate.output_format(body)
    rid = protocol.new_id("chatcmpl" if chat else "cmpl")
    stream = await st.run(ids, params, fmt, deltas=bool(body.stream), format_param=fmt_param,
                          span=st.span_info(rid, "chat" if chat else "text_completion", params, fmt))
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
        return JSONResponse(protocol.chat_body(rid, st.model_name, out, lps))
    return JSONResponse(protocol.completion_body(rid, st.model_name, out, out.text, lps))
