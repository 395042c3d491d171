"""The standard workload: its requests, how they end, and driving them through an engine.

A workload is N concurrent *streams*, each sending its requests one after the
other (closed loop): when a stream's request finishes, its next one is added.
Everything is drawn from one seed, so blocking and pipelined runs see the same
prompts, sampling seeds and lengths.

Lengths are drawn uniformly around a mean (~110 generated tokens by default, as
in the source's benchmark), and requests end the ways real ones do:

* ``stop_token``: on a token the scheduler cannot foresee (as EOS is). This is
  what makes zombies: the pipelined loop has already launched the sequence's
  next step when commit sees the stop. A random-weight model does not emit EOS
  on cue, so ``prepare`` runs the workload once (the warm-up run) to learn each
  such request's tokens and picks as its stop token the first-occurring token
  nearest its drawn length. Seeded sampling is batch- and mode-independent, so
  the request then stops there in every later run.
* ``length``: at ``max_tokens``, which the scheduler knows: never a zombie.
* ``constraint``: a constrained request (``point`` or ``json_schema`` response
  format) that ends when its format is complete, also unforeseeable.

``engine_settings`` sizes an engine for a workload; traced runs of it are in traced_run.py.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from photon_trace.engine.params import SamplingParams

DEFAULT_TOKENS = 110
STOP_KINDS = ("stop_token", "length", "constraint")
CONSTRAINED_KINDS = ("point", "json_schema")

# A JSON Schema a random-weight model finishes in ~100-300 tokens (it pads with whitespace).
_POINT = {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 999},
                                           "y": {"type": "integer", "minimum": 0, "maximum": 999}},
          "required": ["x", "y"], "additionalProperties": False}
_SCHEMA = {"type": "object", "properties": {
    "label": {"type": "string", "maxLength": 8},
    "points": {"type": "array", "items": _POINT, "minItems": 1, "maxItems": 4}},
    "required": ["label", "points"], "additionalProperties": False}

_WORDS = ("the", "device", "waits", "for", "host", "step", "token", "slot", "commit", "launch",
          "stream", "page", "cache", "bubble", "forward", "sample", "copy", "event", "mask", "queue")


@dataclass(frozen=True, slots=True)
class Workload:
    """The recipe of a workload; ``draft`` turns it into requests."""
    streams: int = 8                   # concurrent request streams
    tokens: int = DEFAULT_TOKENS       # mean generated tokens per request
    requests_per_stream: int = 1       # sent one after the other on each stream
    prompt_len: int = 32               # mean prompt length in characters (tokens for the byte tokenizer)
    spread: float = 0.25               # lengths uniform in tokens * (1 ± spread)
    stop_share: float = 0.7            # of unconstrained requests: end on a stop token (the rest on length)
    sampled_share: float = 0.5         # temperature-sampled with a seed (the rest greedy)
    constrained: str | None = None     # None | "point" | "json_schema"
    constrained_share: float = 0.5     # of requests, when constrained
    seed: int = 0

    def __post_init__(self) -> None:
        if self.streams < 1 or self.requests_per_stream < 1 or self.tokens < 2 or self.prompt_len < 1:
            raise ValueError("streams, requests_per_stream and prompt_len must be >= 1, tokens >= 2")
        if not 0 <= self.spread < 1:
            raise ValueError(f"spread must be in [0, 1), got {self.spread}")
        for name in ("stop_share", "sampled_share", "constrained_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1]")
        if self.constrained not in (None, *CONSTRAINED_KINDS):
            raise ValueError(f"constrained must be None or one of {CONSTRAINED_KINDS}, got {self.constrained!r}")

    @property
    def max_len(self) -> int:
        """The longest length a request can be asked for."""
        return math.ceil(self.tokens * (1 + self.spread))

    @property
    def margin(self) -> int:
        """How far ``max_tokens`` lies beyond a stop-token request's drawn length."""
        return max(4, self.tokens // 4)

    @property
    def max_tokens(self) -> int:
        """The largest ``max_tokens`` any request gets."""
        return self.max_len + self.margin

    @property
    def max_prompt_chars(self) -> int:
        return math.ceil(self.prompt_len * 1.5) + 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def draft(self) -> list[RequestSpec]:
        """The requests, stream by stream; stop tokens are still to be found by ``prepare``."""
        specs = []
        for s in range(self.streams):
            for k in range(self.requests_per_stream):
                specs.append(self._draft_one(s, k))
        return specs

    def _draft_one(self, stream: int, k: int) -> RequestSpec:
        rng = random.Random(f"photon_trace.workload:{self.seed}:{stream}:{k}")
        n = max(1, round(self.prompt_len * rng.uniform(0.5, 1.5)))
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < n:
            words.append(rng.choice(_WORDS))
        prompt = " ".join(words)[:n]
        target = max(2, round(self.tokens * rng.uniform(1 - self.spread, 1 + self.spread)))
        sampled = rng.random() < self.sampled_share
        seed = rng.randrange(2**31)
        sampling = dict(temperature=0.8, top_p=0.95, seed=seed) if sampled else dict(temperature=0.0, seed=seed)
        fmt = None
        if self.constrained is not None and rng.random() < self.constrained_share:
            stop = "constraint"
            fmt = _response_format(self.constrained, target)
            # point: max_count points, then EOS; json_schema: the object's end (or max_tokens)
            limit = target + self.margin
        elif rng.random() < self.stop_share:
            stop, limit = "stop_token", target + self.margin
        else:
            stop, limit = "length", target
        params = SamplingParams(max_tokens=limit, ignore_eos=fmt is None, **sampling)
        return RequestSpec(stream, k, prompt, params, fmt, target, stop)


def _response_format(kind: str, target: int):
    from photon_trace.engine.constraints import ResponseFormat

    if kind == "point":
        return ResponseFormat("point", max_count=max(1, (target - 1) // 2))  # 2 tokens a point, then EOS
    return ResponseFormat("json_schema", schema=json.dumps(_SCHEMA))


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of a workload, ready to add to an engine."""
    stream: int
    index: int                 # its place in the stream's sequence
    prompt: str
    params: SamplingParams
    response_format: Any = None
    target: int = 0            # the drawn length
    stop: str = "length"       # how it is meant to end (STOP_KINDS)


@dataclass(frozen=True, slots=True)
class PreparedWorkload:
    """A workload with its stop tokens resolved: what every measured run sends."""
    workload: Workload
    requests: tuple[RequestSpec, ...]

    def planned_stops(self) -> dict[str, int]:
        return dict(Counter(r.stop for r in self.requests))


@dataclass(slots=True)
class RunResult:
    """What one drive of a workload produced."""
    tokens: list[list[int]]            # per request, in workload order
    finish_reasons: list[str | None]
    wall_s: float                      # first add_request to the engine idle again
    steps: int
    zombie_rows: int
    prompts: list[list[int]] = dataclasses.field(default_factory=list)   # prompt token ids, as the engine encoded them

    @property
    def generated(self) -> int:
        return sum(len(t) for t in self.tokens)

    def digest(self) -> str:
        """A short hash of every request's tokens: equal digests, identical outputs."""
        return hashlib.sha1(json.dumps(self.tokens).encode()).hexdigest()[:16]


# -- driving -----------------------------------------------------------------------------------

def drive(engine, requests: tuple[RequestSpec, ...] | list[RequestSpec],
          on_tokens: Callable[[int], None] | None = None) -> RunResult:
    """Send ``requests`` stream by stream (closed loop) and tick until the engine is idle."""
    queues: dict[int, deque[int]] = {}
    for i, r in enumerate(requests):
        queues.setdefault(r.stream, deque()).append(i)
    tokens: list[list[int]] = [[] for _ in requests]
    prompts: list[list[int]] = [[] for _ in requests]
    reasons: list[str | None] = [None] * len(requests)
    live: dict[int, int] = {}          # engine req_id -> workload index
    steps0, zombies0 = engine.steps, engine.zombie_rows

    def send(stream: int) -> None:
        if queues[stream]:
            i = queues[stream].popleft()
            r = requests[i]
            rid = engine.add_request(r.prompt, r.params, r.response_format)
            live[rid] = i
            prompts[i] = list(engine.requests.get(rid).prompt)

    t0 = time.perf_counter()
    for stream in queues:
        send(stream)
    while live:
        for d in engine.step():
            i = live.get(d.req_id)
            if i is None:
                continue
            tokens[i].extend(d.token_ids)
            if on_tokens is not None and d.token_ids:
                on_tokens(len(d.token_ids))
            if d.finished:
                reasons[i] = d.finish_reason
                del live[d.req_id]
                engine.requests.forget(d.req_id)
                send(requests[i].stream)
    engine.run_until_idle()             # the last zombie step is part of the run's cost
    wall = time.perf_counter() - t0
    return RunResult(tokens, reasons, wall, engine.steps - steps0, engine.zombie_rows - zombies0, prompts)


def prepare(engine, workload: Workload) -> PreparedWorkload:
    """Resolve stop tokens by running the workload once, then warm ``engine`` up on the
    resolved schedule (``warm_up``).

    A ``stop_token`` request gets as its stop token the token it produced at the
    position nearest its drawn length whose token did not occur earlier in its
    output, so the stop fires exactly there; with no such position before its
    ``max_tokens`` it becomes a ``length`` request of its drawn length.
    """
    drafts = workload.draft()
    run = drive(engine, drafts)
    resolved = []
    for spec, out in zip(drafts, run.tokens):
        if spec.stop == "stop_token":
            pos = _stop_position(out, spec.target, spec.params.max_tokens)
            if pos is None:
                spec = dataclasses.replace(spec, stop="length",
                                           params=dataclasses.replace(spec.params, max_tokens=spec.target))
            else:
                spec = dataclasses.replace(spec, params=dataclasses.replace(
                    spec.params, stop_token_ids=(out[pos],)))
        resolved.append(spec)
    prepared = PreparedWorkload(workload, tuple(resolved))
    warm_up(engine, prepared)
    return prepared


def warm_up(engine, prepared: PreparedWorkload) -> None:
    """Run the measured schedule untraced: every (slot, batch, page) bucket a measured run
    of ``prepared`` uses on this engine is then already captured (CUDA graphs: a
    synchronize and a capture, tens of ms, that would otherwise land inside traced
    steps), and allocator and caches are grown. The draft run that resolves stop tokens
    is not enough: its requests end elsewhere, so its batches differ.

    Step t uses slot t % 2 and step indices run on across runs: when the schedule takes
    an odd number of steps, consecutive runs meet each batch in alternate slots, so it
    is replayed a second time, from the other parity."""
    steps = drive(engine, prepared.requests).steps
    if steps % 2:
        drive(engine, prepared.requests)


def _stop_position(out: list[int], target: int, max_tokens: int) -> int | None:
    """Index nearest ``target - 1`` whose token is new there, stopping before ``max_tokens``."""
    first = {}
    for i, t in enumerate(out):
        first.setdefault(t, i)
    new_at = sorted(i for i in first.values() if 0 < i < max_tokens - 1)
    if not new_at:
        return None
    return min(new_at, key=lambda i: (abs(i - (target - 1)), i))


# -- sizing ------------------------------------------------------------------------------------

def engine_settings(workload: Workload, **overrides) -> dict[str, Any]:
    """Engine sizes that fit ``workload`` (rows, resident sequences, KV pool, context), plus overrides.

    A finished stream's zombie keeps its row and pages until its last step
    commits while the stream's next request is admitted, so room is doubled.
    """
    page = overrides.get("page_size", 16)
    context = -(-(workload.max_prompt_chars + 2 + workload.max_tokens) // page) * page
    streams = workload.streams
    settings = dict(max_rows=max(streams, 8), max_step_tokens=max(256, streams),
                    max_seqs=2 * streams + 2, kv_tokens=(2 * streams + 2) * context,
                    max_context=context)
    settings.update(overrides)
    return settings
