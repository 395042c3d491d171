"""Per-request sampling parameters, validated on the host.

Everything a request carries to the device is checked here (types as well as
ranges), so no value can fail or misbehave inside a device op: a bad value is a
ValueError naming its field, raised before the request exists. ``top_k`` beyond
the vocabulary is legal here and clipped by the engine, which knows the
vocabulary (as transformers clips it).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

# Below this a temperature samples greedily: dividing logits by it would overflow float32
# (1e-40 is denormal; logits / 1e-40 is inf). vLLM uses the same threshold.
MIN_TEMPERATURE = 1e-5
MAX_TEMPERATURE = 100.0
MAX_PENALTY = 2.0          # OpenAI's range for presence/frequency penalties: [-2, 2]
MAX_TOP_LOGPROBS = 20      # OpenAI's limit on alternatives per token (the staging layout's width)


@dataclass(frozen=True, slots=True)
class SamplingParams:
    temperature: float = 0.0          # 0 (or below MIN_TEMPERATURE) is greedy
    top_k: int = 0                    # 0 keeps every token; larger than the vocabulary keeps every token
    top_p: float = 1.0                # nucleus mass; 1 keeps every token
    min_p: float = 0.0                # keep tokens at least min_p times as likely as the likeliest; 0 keeps all
    seed: int | None = None           # same seed, same tokens, whatever the batch or mode
    max_tokens: int = 64              # generated tokens at most
    stop_token_ids: tuple[int, ...] = field(default=())  # finish when one is sampled (kept in the output)
    stop: tuple[str, ...] = field(default=())             # finish when the text contains one (trimmed)
    ignore_eos: bool = False          # keep going past EOS (benchmarks want fixed lengths)
    presence_penalty: float = 0.0     # OpenAI: subtracted once from every token already generated
    frequency_penalty: float = 0.0    # OpenAI: subtracted per earlier occurrence of a generated token
    logprobs: int | None = None       # None: none; n in [0, 20]: the sampled token's and the n likeliest

    def __post_init__(self) -> None:
        _real(self, "temperature", 0.0, MAX_TEMPERATURE)
        _real(self, "top_p", 0.0, 1.0, low_open=True)
        _real(self, "min_p", 0.0, 1.0)
        _real(self, "presence_penalty", -MAX_PENALTY, MAX_PENALTY)
        _real(self, "frequency_penalty", -MAX_PENALTY, MAX_PENALTY)
        _int(self, "top_k", 0, None)
        _int(self, "max_tokens", 1, None)
        if self.seed is not None:
            _int(self, "seed", 0, 2**63 - 1)
        if self.logprobs is not None:
            _int(self, "logprobs", 0, MAX_TOP_LOGPROBS)
        if not isinstance(self.ignore_eos, bool):
            raise ValueError(f"ignore_eos must be a bool, got {self.ignore_eos!r}")
        if isinstance(self.stop, str):
            raise ValueError("stop must be a sequence of strings, not one string")
        if isinstance(self.stop_token_ids, (str, bytes)):
            raise ValueError("stop_token_ids must be a sequence of ints")
        ids, stops = tuple(self.stop_token_ids), tuple(self.stop)
        for t in ids:
            if not isinstance(t, numbers.Integral) or isinstance(t, bool) or t < 0:
                raise ValueError(f"stop_token_ids must be non-negative ints, got {t!r}")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in ids))
        object.__setattr__(self, "stop", stops)
        for t in self.stop_token_ids:
            if not isinstance(t, int) or isinstance(t, bool) or t < 0:
                raise ValueError(f"stop_token_ids must be non-negative ints, got {t!r}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise ValueError("stop strings must be non-empty strings")

    @property
    def greedy(self) -> bool:
        return self.temperature < MIN_TEMPERATURE

    def for_vocab(self, vocab_size: int) -> SamplingParams:
        """These params with ``top_k`` clipped to the vocabulary (0 when it keeps every token)."""
        return replace(self, top_k=0) if self.top_k >= vocab_size else self

    @classmethod
    def with_defaults(cls, defaults: Mapping[str, object], **given) -> SamplingParams:
        """Params from ``given``, where a field given as None takes ``defaults``' value (a model's
        ``generation_config.json``, as vLLM applies it), else the field's own default."""
        names = {f.name for f in fields(cls)}
        unknown = set(given) - names
        if unknown:
            raise ValueError(f"unknown sampling parameter(s): {', '.join(sorted(unknown))}")
        merged = {k: v for k, v in defaults.items() if k in names}
        merged.update({k: v for k, v in given.items() if v is not None})
        return cls(**merged)


def _real(p: SamplingParams, name: str, low: float, high: float, low_open: bool = False) -> None:
    v = getattr(p, name)
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    if v < low or v > high or (low_open and v == low):
        raise ValueError(f"{name} must be in {'(' if low_open else '['}{low:g}, {high:g}], got {v!r}")
    object.__setattr__(p, name, float(v))


def _int(p: SamplingParams, name: str, low: int, high: int | None) -> None:
    v = getattr(p, name)
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {v!r}")
    if v < low or (high is not None and v > high):
        raise ValueError(f"{name} must be in [{low}, {'∞' if high is None else high}], got {v}")
    object.__setattr__(p, name, int(v))
