"""Per-request sampling parameters."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SamplingParams:
    temperature: float = 0.0          # 0 is greedy
    top_k: int = 0                    # 0 keeps every token
    top_p: float = 1.0                # nucleus mass; 1 keeps every token
    seed: int | None = None           # same seed, same tokens, whatever the batch or mode
    max_tokens: int = 64              # generated tokens at most
    stop_token_ids: tuple[int, ...] = field(default=())  # finish when one is sampled (kept in the output)
    stop: tuple[str, ...] = field(default=())             # finish when the text contains one (trimmed)
    ignore_eos: bool = False          # keep going past EOS (benchmarks want fixed lengths)

    def __post_init__(self) -> None:
        if not (self.temperature >= 0.0) or self.temperature > 100.0:
            raise ValueError(f"temperature must be in [0, 100], got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.seed is not None and not (0 <= self.seed < 2**63):
            raise ValueError(f"seed must be in [0, 2**63), got {self.seed}")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        object.__setattr__(self, "stop", tuple(self.stop))
        if any(not s for s in self.stop):
            raise ValueError("stop strings must be non-empty")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
