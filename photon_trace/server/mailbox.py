"""What passes between the web handlers' event loops and the engine thread (``loop.py``).

A handler queues a command (``_Add``, ``_Abort``) for the engine thread and reads its request's
``Update``s from a ``RequestStream``, a mailbox on the handler's own asyncio loop. The engine
thread never touches an asyncio queue from its side of the line: per tick, the updates bound
for one loop go over in a single ``call_soon_threadsafe`` (``_post``) and ``_deliver`` puts them
in their queues there.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from photon_trace.engine.outputs import RequestOutput
from photon_trace.engine.params import SamplingParams


@dataclass(slots=True)
class Update:
    """What a request's stream receives: new tokens; on the last one, the finished output."""
    token_ids: list[int]
    finished: bool = False
    logprobs: list | None = None   # TokenLogprob per token, when the request asked for them
    output: RequestOutput | None = None
    error: str | None = None       # the engine failed or the server is stopping


@dataclass(eq=False)
class RequestStream:
    """One request's mailbox on its asyncio loop. Made on that loop, fed by the engine thread."""
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    queue: asyncio.Queue[Update] = field(default_factory=asyncio.Queue)
    deltas: bool = True        # False: only the final update (non-streamed requests)
    req_id: int = -1


@dataclass(slots=True)
class _Add:
    prompt: list[int]
    params: SamplingParams
    response_format: Any
    stream: RequestStream
    future: Future
    span: dict | None = None


@dataclass(slots=True)
class _Abort:
    stream: RequestStream


def _post(loop: asyncio.AbstractEventLoop, batch: list[tuple[RequestStream, Update]]) -> None:
    try:
        loop.call_soon_threadsafe(_deliver, batch)
    except RuntimeError:  # that event loop is closed: nobody is listening any more
        pass


def _deliver(batch: list[tuple[RequestStream, Update]]) -> None:
    for stream, update in batch:
        stream.queue.put_nowait(update)
