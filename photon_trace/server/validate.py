"""The rules on request values: each bad value becomes a 4xx naming its ``param``.

Everything here runs on the web side before the engine sees the request, so a
bad request never reaches the engine thread. The engine validates again (its
``ValueError``s also become 400s): these checks exist to give OpenAI's error
shape and parameter names, not to be the only line of defence.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from photon_trace.engine.constraints import ConstraintError, ResponseFormat
from photon_trace.engine.model.chat_template import ChatTemplateError, chat_prompt_ids
from photon_trace.engine.params import SamplingParams

from photon_trace.server.body import check_tree, parse_json
from photon_trace.server.errors import APIError, bad_request
from photon_trace.server.protocol import ChatMessage

MAX_TEMPERATURE = 2.0   # OpenAI's range; the engine itself would take up to 100
MAX_STOP_STRINGS = 4
MAX_PENALTY = 2.0       # presence and frequency penalties: OpenAI's range
CONTEXT_EXCEEDED = "context_length_exceeded"

# Chat prompts use the model's own template (engine/model/chat_template.py); models without
# one (the presets' byte tokenizer) get each message as "<|role|>\n{content}\n", then
# "<|assistant|>\n" for the reply.
CHAT_ROLES = ("system", "developer", "user", "assistant")


@dataclass(frozen=True, slots=True)
class Limits:
    """What the served engine can take."""
    model: str              # the served model's name; requests naming another get a 404
    max_context: int        # prompt + generated tokens of one request
    vocab_size: int         # token-id prompts must lie in [0, vocab_size)


def check_model(requested: str | None, limits: Limits) -> None:
    if requested is not None and requested != limits.model:
        raise APIError(404, f"The model `{requested}` does not exist; this server serves `{limits.model}`",
                       param="model", code="model_not_found")


def check_n(n: int | None) -> None:
    if n is not None and n != 1:
        raise bad_request(f"n must be 1 (one choice per request; send n requests with different seeds "
                          f"for n samples), got {n}", "n", "unsupported_value")


def prompt_text(prompt: Any) -> str | None:
    """A completion prompt's text (a string, or one string in a list); None for token ids."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise bad_request("prompt must not be empty", "prompt")
        return prompt
    return None


def prompt_ids(prompt: Any, vocab_size: int) -> list[int]:
    """A completion prompt given as token ids (``prompt_text`` takes the text forms)."""
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        if any(t < 0 or t >= vocab_size for t in prompt):
            raise bad_request(f"prompt token ids must lie in [0, {vocab_size})", "prompt")
        return list(prompt)
    if isinstance(prompt, list) and not prompt:
        raise bad_request("prompt must not be empty", "prompt")
    if isinstance(prompt, list) and all(isinstance(p, (str, list)) for p in prompt):
        raise bad_request("one prompt per request: send a string or a list of token ids", "prompt",
                          "unsupported_value")
    raise bad_request("prompt must be a string or a list of token ids", "prompt")


def chat_prompt(messages: Sequence[ChatMessage], tokenizer) -> list[int]:
    """The messages' prompt ids: through the model's chat template, as transformers'
    ``apply_chat_template(..., add_generation_prompt=True)`` makes them, or the documented
    fallback (see ``CHAT_ROLES``). A template's own refusal is a 400 naming ``messages``."""
    if not messages:
        raise bad_request("messages must not be empty", "messages")
    plain = []
    for i, m in enumerate(messages):
        if m.role not in CHAT_ROLES:
            raise bad_request(f"messages[{i}].role must be one of {', '.join(CHAT_ROLES)}, got {m.role!r}",
                              f"messages[{i}].role")
        plain.append({"role": m.role, "content": _content_text(m.content, i)})
    if not any(m.role == "user" for m in messages):
        raise bad_request("messages must contain a user message", "messages")
    try:
        return chat_prompt_ids(tokenizer, plain)
    except ChatTemplateError as e:
        raise bad_request(str(e), "messages") from None


def _content_text(content: str | list[dict[str, Any]] | None, i: int) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    texts = []
    for j, part in enumerate(content):
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise bad_request(f"messages[{i}].content[{j}]: only text parts are supported",
                              f"messages[{i}].content", "unsupported_value")
        texts.append(part["text"])
    return "".join(texts)


def check_context(prompt_len: int, limits: Limits, param: str) -> None:
    if prompt_len >= limits.max_context:
        raise bad_request(f"the prompt is {prompt_len} tokens; the context holds {limits.max_context} "
                          f"(prompt and output together)", param, CONTEXT_EXCEEDED)


def max_tokens(requested: int | None, prompt_len: int, limits: Limits, default: int) -> int:
    """The output budget: ``requested``, or ``default`` clipped to what the context leaves."""
    room = limits.max_context - prompt_len
    if requested is None:
        return max(1, min(default, room))
    if requested <= 0:
        raise bad_request(f"max_tokens must be at least 1, got {requested}", "max_tokens")
    if requested > room:
        raise bad_request(f"max_tokens ({requested}) plus the prompt ({prompt_len} tokens) exceeds the "
                          f"context of {limits.max_context} tokens", "max_tokens", CONTEXT_EXCEEDED)
    return requested


def sampling_params(*, temperature: float | None, top_p: float | None, top_k: int | None = None,
                    min_p: float | None = None, seed: int | None, stop: str | list[str] | None = None, max_tokens: int,
                    ignore_eos: bool = False, presence_penalty: float | None = None,
                    frequency_penalty: float | None = None, logprobs: int | None = None,
                    vocab_size: int | None = None, defaults: Mapping[str, Any] | None = None) -> SamplingParams:
    """Every sampling value checked here (a 400 naming it), before anything reaches the engine.

    An unset temperature, top_p, top_k or min_p takes the model's generation_config.json value
    (``defaults``, as vLLM does), else OpenAI's default. ``top_k`` larger than the vocabulary
    means the whole vocabulary (as in vLLM): it is clipped to ``vocab_size``, so no request
    can carry an out-of-range k to the device."""
    defaults = defaults or {}
    temperature = defaults.get("temperature") if temperature is None else temperature
    top_p = defaults.get("top_p") if top_p is None else top_p
    top_k = defaults.get("top_k") if top_k is None else top_k
    min_p = defaults.get("min_p") if min_p is None else min_p
    t = 1.0 if temperature is None else temperature
    if not 0.0 <= t <= MAX_TEMPERATURE:  # also refuses NaN and infinities
        raise bad_request(f"temperature must be in [0, {MAX_TEMPERATURE:g}], got {temperature}", "temperature")
    p = 1.0 if top_p is None else top_p
    if not 0.0 < p <= 1.0:
        raise bad_request(f"top_p must be in (0, 1], got {top_p}", "top_p")
    k = 0 if top_k in (None, -1) else top_k
    if k < 0:
        raise bad_request(f"top_k must be -1, 0 (off) or positive, got {top_k}", "top_k")
    if vocab_size is not None and k >= vocab_size:
        k = 0                       # the whole vocabulary: the same as off
    m = 0.0 if min_p is None else min_p
    if not 0.0 <= m <= 1.0:
        raise bad_request(f"min_p must be in [0, 1], got {min_p}", "min_p")
    if seed is not None and not 0 <= seed < 2**63:
        raise bad_request(f"seed must be in [0, 2**63), got {seed}", "seed")
    stops = [stop] if isinstance(stop, str) else list(stop or ())
    if len(stops) > MAX_STOP_STRINGS or any(not s for s in stops):
        raise bad_request(f"stop takes up to {MAX_STOP_STRINGS} non-empty strings", "stop")
    penalties = {}
    for name, value in (("presence_penalty", presence_penalty), ("frequency_penalty", frequency_penalty)):
        if value is None:
            continue
        if not -MAX_PENALTY <= value <= MAX_PENALTY:
            raise bad_request(f"{name} must be in [-{MAX_PENALTY:g}, {MAX_PENALTY:g}], got {value}", name)
        if value:
            penalties[name] = float(value)
    try:
        return SamplingParams(temperature=t, top_p=p, top_k=k, min_p=m, seed=seed, stop=tuple(stops),
                              max_tokens=max_tokens, ignore_eos=ignore_eos, logprobs=logprobs, **penalties)
    except ValueError as e:  # the engine's own rules, should they be stricter than ours
        raise bad_request(str(e)) from None


def response_format(spec: dict[str, Any] | None) -> ResponseFormat | None:
    """OpenAI's ``response_format`` (text, json_object, json_schema) plus our kinds:
    ``{"type": "regex", "regex": ...}``, ``{"type": "grammar", "grammar": ...}`` (EBNF, root rule
    ``root``), ``{"type": "point" | "detect", "max_count": N}``."""
    if spec is None:
        return None
    kind = spec.get("type")
    try:
        if kind in (None, "text"):
            return None
        if kind == "json_object":
            return ResponseFormat("json_object")
        if kind == "json_schema":
            inner = spec.get("json_schema")
            if not isinstance(inner, dict) or "schema" not in inner:
                raise bad_request("response_format.json_schema.schema is required", "response_format")
            return ResponseFormat("json_schema", schema=inner["schema"])
        if kind == "regex":
            return ResponseFormat("regex", regex=spec.get("regex"))
        if kind == "grammar":
            return ResponseFormat("grammar", grammar=spec.get("grammar"))
        if kind in ("point", "detect"):
            return ResponseFormat(kind, max_count=spec.get("max_count"))
    except ConstraintError as e:
        raise bad_request(str(e), "response_format", "invalid_response_format") from None
    raise bad_request(f"response_format.type must be text, json_object, json_schema, regex, grammar, "
                      f"point or detect, got {kind!r}", "response_format")


# vLLM's guided_* request fields, each as the response_format it stands for: the one place
# they are mapped. guided_choice is a grammar whose root is one of the choices (JSON string
# literals: xgrammar's EBNF takes JSON's escapes).
GUIDED = ("guided_json", "guided_regex", "guided_choice", "guided_grammar")


def output_format(body: Any) -> tuple[ResponseFormat | None, str]:
    """A request's output format and the field that asked for it: its ``response_format``, or
    one of vLLM's ``guided_json`` (a JSON Schema, or its text), ``guided_regex``, ``guided_choice``
    (a list of strings) and ``guided_grammar`` (EBNF). A request may set one of them (a 400
    naming the second)."""
    given = [name for name in GUIDED if getattr(body, name) is not None]
    fmt = response_format(body.response_format)
    if fmt is not None:
        given.insert(0, "response_format")
    if len(given) > 1:
        raise bad_request(f"set one output format, not {' and '.join(given)}", given[1])
    if not given or given[0] == "response_format":
        return fmt, "response_format"
    name = given[0]
    value = getattr(body, name)
    if name == "guided_json":
        if isinstance(value, str):   # JSON text: the same checks as a body's (no NaN, depth, surrogates)
            try:
                value = parse_json(value.encode("utf-8", "surrogatepass"))
                check_tree(value)
            except APIError as e:
                text = e.message.replace("the request body", "its text").replace("the body", "its text")
                raise bad_request(f"guided_json: {text}", name) from None
        spec = {"type": "json_schema", "json_schema": {"schema": value}}
    elif name == "guided_regex":
        spec = {"type": "regex", "regex": value}
    elif name == "guided_grammar":
        spec = {"type": "grammar", "grammar": value}
    else:
        if not value or not all(value):
            raise bad_request("guided_choice takes one or more non-empty strings", name)
        spec = {"type": "grammar", "grammar": "root ::= " + " | ".join(json.dumps(c, ensure_ascii=False)
                                                                       for c in value)}
    try:
        return response_format(spec), name
    except APIError as e:
        raise bad_request(e.message.replace("response_format", name), name, e.code) from None
