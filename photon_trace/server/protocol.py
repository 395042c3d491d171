"""The OpenAI request shapes (pydantic, strict: unknown fields and wrong types refused) and the response bodies.

Requests are parsed here for *types*; the rules on values (ranges, limits, the
prompt against the context) live in ``validate.py`` so every bad value gets one
OpenAI-style error naming its ``param``. Responses are plain dicts.
"""
from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, WithJsonSchema

from photon_trace.engine.outputs import RequestOutput

# The engine's finish reasons in OpenAI's words: a constraint that reached its end
# stopped the output as EOS would have.
FINISH_REASONS = {"eos": "stop", "stop": "stop", "constraint": "stop", "length": "length", "abort": "abort"}


# A completion prompt: one string, [one string] or token ids. Typed ``Any`` so the
# checks in validate.prompt_ids name what is wrong; the schema documents the shapes.
PromptField = Annotated[Any, WithJsonSchema({"anyOf": [
    {"type": "string", "minLength": 1}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1},
    {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1}]})]

# Strict: a string for a number, "yes" for a boolean or a field we do not know is a 400
# naming it, never a silent coercion or a silently ignored option. ``null`` means "the
# default" wherever OpenAI accepts it.
_STRICT = ConfigDict(extra="forbid", strict=True)

# OpenAI fields this server does not implement: a 400 naming the field unless the value
# is null or empty (= unset), checked before the model so the message says so.
UNSUPPORTED = ("logit_bias", "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls",
               "suffix", "best_of", "audio", "modalities", "prediction", "web_search_options",
               "reasoning_effort", "service_tier", "store", "metadata", "verbosity", "prompt_cache_key",
               "safety_identifier")


class StreamOptions(BaseModel):
    model_config = _STRICT
    include_usage: bool | None = None


class _Generation(BaseModel):
    """Fields shared by completions and chat completions (OpenAI names, plus vLLM's top_k, min_p,
    ignore_eos and guided_* fields)."""
    model_config = _STRICT
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None          # -1 or 0: off; larger than the vocabulary: the whole vocabulary
    min_p: float | None = None        # vLLM's: [0, 1], tokens at least min_p times as likely as the likeliest
    seed: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: float | None = None     # [-2, 2], OpenAI's meaning
    frequency_penalty: float | None = None    # [-2, 2], OpenAI's meaning
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: int | None = None
    logprobs: Any = None              # chat: a boolean; completions: 0..20 (checked in logprobs.requested)
    response_format: dict[str, Any] | None = None
    # vLLM's structured-output fields, aliases of response_format's kinds (validate.output_format
    # maps them): a JSON Schema (an object or its JSON text), a regex, choices, an EBNF grammar
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    ignore_eos: bool | None = None
    user: str | None = None           # an end-user id for the caller's own records; no effect here


class CompletionRequest(_Generation):
    prompt: PromptField                   # checked in validate.prompt_ids, with OpenAI-style messages
    echo: bool | None = None
    logprobs: int | None = None


class ChatMessage(BaseModel):
    model_config = _STRICT
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(_Generation):
    messages: list[ChatMessage]
    max_completion_tokens: int | None = None  # OpenAI's newer name for max_tokens
    top_logprobs: Any = None          # 0..20 alternatives per token, with logprobs: true


class SkillRequest(BaseModel):
    """``/v1/point`` and ``/v1/detect``: what to find, and how many at most."""
    model_config = _STRICT
    model: str | None = None
    object: str | None = None         # what to point at / detect ("the red car")
    prompt: str | None = None         # a full prompt instead of ``object``
    image: Any = None                 # refused: the engine's models take no image input
    # at most this many points or boxes (default 50); ``max_count`` as in response_format works too
    max_objects: int | None = Field(None, validation_alias=AliasChoices("max_objects", "max_count"))
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def finish_reason(out: RequestOutput | None, engine_reason: str | None = None) -> str | None:
    reason = out.finish_reason if out is not None else engine_reason
    return FINISH_REASONS.get(reason, reason) if reason else None


def extension(out: RequestOutput) -> dict[str, Any]:
    """Our additions to a response: the engine's request id, its timings and structured result."""
    m = out.metrics
    return {"request_id": out.req_id, "finish_reason": out.finish_reason, "result": out.result,
            "metrics": None if m is None else {"queue_s": m.queue_s, "ttft_s": m.ttft_s,
                                               "tpot_s": m.tpot_s, "e2e_s": m.e2e_s}}


def completion_body(rid: str, model: str, out: RequestOutput, text: str,
                    logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason(out)}],
            "usage": usage(len(out.prompt_token_ids), len(out.token_ids)), "photon_trace": extension(out)}


def chat_body(rid: str, model: str, out: RequestOutput, logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": out.text},
                         "logprobs": logprobs, "finish_reason": finish_reason(out)}],
            "usage": usage(len(out.prompt_token_ids), len(out.token_ids)), "photon_trace": extension(out)}


def completion_chunk(rid: str, model: str, created: int, text: str, reason: str | None,
                     logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": rid, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": reason}]}


def chat_chunk(rid: str, model: str, created: int, delta: dict[str, Any], reason: str | None,
               logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": reason}]}


def usage_chunk(rid: str, obj: str, model: str, created: int, out: RequestOutput) -> dict[str, Any]:
    """The extra last chunk ``stream_options.include_usage`` asks for: no choices, the usage."""
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": [],
            "usage": usage(len(out.prompt_token_ids), len(out.token_ids))}


def skill_body(rid: str, skill: str, model: str, out: RequestOutput) -> dict[str, Any]:
    key = "points" if skill == "point" else "objects"
    return {"id": rid, "object": skill, "created": int(time.time()), "model": model,
            key: list(out.result or []), "finish_reason": finish_reason(out),
            "usage": usage(len(out.prompt_token_ids), len(out.token_ids)), "photon_trace": extension(out)}


def model_body(model: str, created: int, max_context: int) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": created, "owned_by": "photon_trace",
            "max_model_len": max_context}


def models_body(model: str, created: int, max_context: int) -> dict[str, Any]:
    return {"object": "list", "data": [model_body(model, created, max_context)]}
