"""Server-sent events: a request's updates as OpenAI stream chunks.

``TextStream`` turns token deltas into text deltas: an incremental UTF-8
detokenizer, and a hold-back of the last ``len(longest stop string) - 1``
characters so a stop string is never sent before the engine cuts it. On the
last update the engine's own final text (stop strings trimmed) settles what is
left, so the concatenated stream equals the non-streamed text.

``sse_events`` drives one request: it yields the SSE lines (a chunk per non-empty text delta, and always one for the
first token, so a client sees its time to first token) and, if the client
goes away first (the generator is cancelled or closed), aborts the request so
the engine frees its pages and row.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from photon_trace.engine.outputs import RequestOutput
from photon_trace.engine.model.tokenizer import IncrementalDetokenizer

from photon_trace.server.errors import SERVER_ERROR, error_body
from photon_trace.server.loop import RequestStream, Update
from photon_trace.server.protocol import chat_chunk, completion_chunk, finish_reason, usage_chunk

DONE = b"data: [DONE]\n\n"
log = logging.getLogger(__name__)


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class TextStream:
    """Text deltas of one request, safe against stop strings and split UTF-8 sequences."""

    def __init__(self, tokenizer, stop: tuple[str, ...] = ()) -> None:
        self._detok = IncrementalDetokenizer(tokenizer)
        self._hold = max((len(s) for s in stop), default=1) - 1
        self._text = ""       # decoded so far
        self._sent = 0        # characters of it already sent

    def push(self, token_ids: list[int]) -> str:
        self._text += self._detok.push(token_ids)
        upto = len(self._text) - self._hold
        if upto <= self._sent:
            return ""
        piece, self._sent = self._text[self._sent:upto], upto
        return piece

    def finish(self, final_text: str) -> str:
        """What is left to send of the engine's final text (which may have cut a stop string).

        Call it instead of ``push`` for the last update: the last tokens may complete a
        stop string, and only the engine's text knows where it was cut."""
        sent = self._text[:self._sent]
        rest = final_text[len(sent):] if final_text.startswith(sent) else ""
        self._sent = len(final_text)
        return rest


async def sse_events(stream: RequestStream, *, abort: Callable[[RequestStream], None], text: TextStream,
                     chunk: Callable[..., dict], usage: Callable[[RequestOutput], dict] | None,
                     first: dict | None = None, request_id: str = "",
                     logprobs: Callable[[list], dict] | None = None) -> AsyncIterator[bytes]:
    """The SSE body of one request: ``first`` (if any), a chunk for the first token and for
    each later non-empty text delta, the final chunk with the finish reason, the usage chunk
    (if asked), ``[DONE]``. With ``logprobs`` (which shapes a list of TokenLogprob), each
    chunk carries those of the tokens that arrived since the last chunk went out. A failure
    ends the stream with an error event and ``[DONE]`` (the status line went out long ago),
    never with a dropped connection."""
    finished = started = False
    pending: list = []       # logprobs not yet sent (their text may be held back)

    def take_logprobs() -> dict | None:
        if logprobs is None:
            return None
        out = logprobs(pending[:])
        pending.clear()
        return out

    try:
        if first is not None:
            yield sse(first)
        while True:
            update: Update = await stream.queue.get()
            if update.error is not None:
                finished = True
                yield sse(error_body(f"{update.error} (request id {request_id})", SERVER_ERROR))
                yield DONE
                return
            pending.extend(update.logprobs or ())
            if update.finished:
                finished, out = True, update.output
                rest = text.finish(out.text)
                if rest or pending:
                    yield sse(chunk(rest, None, take_logprobs()))
                yield sse(chunk("", finish_reason(out)))
                if usage is not None:
                    yield sse(usage(out))
                yield DONE
                return
            piece = text.push(update.token_ids)
            if piece or not started:   # the first token always goes out: clients see their TTFT
                started = True
                yield sse(chunk(piece, None, take_logprobs()))
    except Exception:
        log.exception("photon_trace: request %s: the stream failed", request_id)
        yield sse(error_body(f"internal error (request id {request_id}; the server log has the details)",
                             SERVER_ERROR))
        yield DONE
    finally:
        if not finished and stream.req_id >= 0:
            abort(stream)           # the client went away (or we failed): free its pages and row now


def completion_stream_parts(rid: str, model: str, include_usage: bool):
    """``(chunk(text, reason), usage(out) or None, first chunk or None)`` for /v1/completions."""
    created = int(time.time())

    def chunk(text: str, reason: str | None, logprobs: dict | None = None) -> dict:
        return completion_chunk(rid, model, created, text, reason, logprobs)

    def usage(out: RequestOutput) -> dict:
        return usage_chunk(rid, "text_completion", model, created, out)

    return chunk, usage if include_usage else None, None


def chat_stream_parts(rid: str, model: str, include_usage: bool):
    """The same for /v1/chat/completions: the first chunk carries the role; the final delta is empty."""
    created = int(time.time())

    def chunk(text: str, reason: str | None, logprobs: dict | None = None) -> dict:
        delta = {"content": text} if text or reason is None else {}
        return chat_chunk(rid, model, created, delta, reason, logprobs)

    def usage(out: RequestOutput) -> dict:
        return usage_chunk(rid, "chat.completion.chunk", model, created, out)

    first = chat_chunk(rid, model, created, {"role": "assistant", "content": ""}, None)
    return chunk, usage if include_usage else None, first
