"""What the engine hands back: per-tick deltas and finished requests with metrics."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class RequestDelta:
    """New tokens of one request at one commit; ``finished`` on its last."""
    req_id: int
    token_ids: list[int]
    finished: bool
    finish_reason: str | None


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
