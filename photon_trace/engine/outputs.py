"""What the engine hands back: per-tick deltas and finished requests with metrics."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A sampled token's log-probability under the model, and the likeliest tokens at its
    position (best first; as many as the request asked for)."""
    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(slots=True)
class RequestDelta:
    """New tokens of one request at one commit; ``finished`` on its last."""
    req_id: int
    token_ids: list[int]
    finished: bool
    finish_reason: str | None
    logprobs: list[TokenLogprob] | None = None   # one per token, when the request asked for them


@dataclass(slots=True)
class RequestMetrics:
    queue_s: float            # arrival -> admission
    ttft_s: float             # arrival -> first token on the host
    tpot_s: float             # mean time per output token after the first
    e2e_s: float              # arrival -> finished


@dataclass(slots=True)
class RequestOutput:
    req_id: int
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: str | None
    metrics: RequestMetrics | None
    result: Any = None        # the constraint's structured result (points, boxes, JSON)
    logprobs: list[TokenLogprob] | None = None   # one per token, when the request asked for them


@dataclass(frozen=True, slots=True)
class EngineStats:
    """A snapshot of the engine's counters, published at the end of every tick."""
    steps: int                # steps committed
    tokens: int               # tokens appended at commit
    zombie_rows: int          # rows committed after their sequence had finished
    running: int              # requests admitted (holding a row and pages)
    waiting: int              # requests queued for admission
    kv_pages_used: int
    kv_pages_total: int       # pages that can be handed out (all but the scratch page)
    idle: bool                # nothing running, waiting or in flight
