"""Log-probabilities in OpenAI's shapes: what a request asks for, and the response objects.

Chat completions take ``logprobs: true`` and ``top_logprobs`` (0..20) and answer
``{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}``;
completions take ``logprobs: N`` (0..20; OpenAI stops at 5) and answer the legacy
``{"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}``.
The values are the model's: log_softmax of its logits (after a constraint's mask,
before penalties and temperature), computed on the device beside the sampled token.
"""
from __future__ import annotations

import math
from typing import Any

from photon_trace.engine.outputs import TokenLogprob
from photon_trace.engine.params import MAX_TOP_LOGPROBS

from photon_trace.server.errors import bad_request


def requested(chat: bool, logprobs: Any, top_logprobs: Any = None) -> int | None:
    """How many alternatives per token a request asks for (None: no logprobs at all)."""
    if chat:
        if logprobs is not None and not isinstance(logprobs, bool):
            raise bad_request(f"logprobs must be a boolean, got {logprobs!r}", "logprobs")
        if top_logprobs is not None:
            _check_count(top_logprobs, "top_logprobs")
            if not logprobs:
                raise bad_request("top_logprobs needs logprobs: true", "top_logprobs")
        return (top_logprobs or 0) if logprobs else None
    if logprobs is None:
        return None
    _check_count(logprobs, "logprobs")
    return logprobs


def _check_count(value: Any, param: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOP_LOGPROBS:
        raise bad_request(f"{param} must be an integer in [0, {MAX_TOP_LOGPROBS}], got {value!r}", param)


def token_text(tokenizer, token_id: int) -> tuple[str, bytes]:
    """A token as text (a byte-level piece of a character decodes to U+FFFD, as in OpenAI's
    responses, with ``bytes`` exact) and its bytes; special tokens by name, with no bytes."""
    raw = tokenizer.token_bytes(token_id)
    if raw:
        return raw.decode("utf-8", errors="replace"), raw
    name = getattr(tokenizer, "token_name", None)
    return (name(token_id) if name is not None else f"<{token_id}>"), b""


def _value(v: float) -> float:
    # JSON has no -inf: a token a constraint forbade has probability 0; OpenAI's floor is -9999.0
    return v if math.isfinite(v) else -9999.0


def chat_logprobs(tokenizer, lps: list[TokenLogprob]) -> dict[str, Any]:
    def entry(token_id: int, logprob: float) -> dict[str, Any]:
        text, raw = token_text(tokenizer, token_id)
        return {"token": text, "logprob": _value(logprob), "bytes": list(raw)}

    return {"content": [{**entry(lp.token_id, lp.logprob), "top_logprobs": [entry(t, v) for t, v in lp.top]}
                        for lp in lps],
            "refusal": None}


class StreamLogprobs:
    """A stream's logprobs, chunk by chunk: completions' text offsets run on across chunks."""

    def __init__(self, tokenizer, chat: bool) -> None:
        self._tokenizer, self._chat, self._offset = tokenizer, chat, 0

    def __call__(self, lps: list[TokenLogprob]) -> dict[str, Any]:
        if self._chat:
            return chat_logprobs(self._tokenizer, lps)
        out = completion_logprobs(self._tokenizer, lps, self._offset)
        if lps:
            last_text, last_raw = token_text(self._tokenizer, lps[-1].token_id)
            self._offset = out["text_offset"][-1] + (len(last_text) if last_raw else 0)
        return out


def completion_logprobs(tokenizer, lps: list[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """``offset``: characters of text before these tokens (the prompt's with echo, the earlier
    chunks' when streaming)."""
    tokens, values, tops, offsets = [], [], [], []
    for lp in lps:
        text, raw = token_text(tokenizer, lp.token_id)
        tokens.append(text)
        values.append(_value(lp.logprob))
        tops.append({token_text(tokenizer, t)[0]: _value(v) for t, v in lp.top})
        offsets.append(offset)
        offset += len(text) if raw else 0   # a special token adds nothing to the text
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}
