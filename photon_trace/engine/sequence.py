"""A sequence: one request's state as the scheduler sees it. Plain Python, no torch."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from photon_trace.engine.constraints.interface import Constraint
from photon_trace.engine.outputs import TokenLogprob
from photon_trace.engine.params import SamplingParams


class FinishReason(str, Enum):
    EOS = "eos"
    STOP = "stop"          # a stop token or stop string
    LENGTH = "length"      # max_tokens reached
    CONSTRAINT = "constraint"  # the constraint reached its accepting end
    ABORT = "abort"
    ERROR = "error"        # the constraint rejected a committed token: a masking bug, contained to the request


@dataclass(slots=True, eq=False)
class Sequence:
    req_id: int
    prompt: list[int]
    params: SamplingParams
    seed: int                         # the effective seed (drawn at arrival when not given)
    constraint: Constraint | None = None
    arrival_ns: int = 0
    # -- scheduling state --------------------------------------------------------------
    row: int = -1                     # token-table row while resident, -1 otherwise
    pages: list[int] = field(default_factory=list)
    reserved_pages: int = 0           # pages promised at admission (prompt + max_tokens)
    prefilled: int = 0                # prompt tokens whose forward has been launched
    scheduled: int = 0                # output tokens whose sampling has been launched
    # -- pipelining state --------------------------------------------------------------
    finalized: bool = False           # stopped: commit of later in-flight steps is a no-op
    inflight_refs: int = 0            # launched-but-uncommitted steps that reference it (0..2)
    freed: bool = False               # pages and row given back (Scheduler.settle: the zombie rule)
    finish_reason: FinishReason | None = None
    # -- results -----------------------------------------------------------------------
    output: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None   # one per output token, when params.logprobs is set
    text: str = ""
    admitted_ns: int = 0
    first_token_ns: int = 0
    finished_ns: int = 0

    @property
    def in_prefill(self) -> bool:
        return self.prefilled < len(self.prompt)

    @property
    def kv_len(self) -> int:
        """KV positions written by launched forwards (prompt plus decoded inputs)."""
        return self.prefilled + max(0, self.scheduled - 1)

    @property
    def wants_decode(self) -> bool:
        """Ready for another decode row: prefill launched, budget left, not stopped."""
        return not self.finalized and not self.in_prefill and 0 < self.scheduled < self.params.max_tokens
