"""Are blocking and pipelined outputs the same? Exactly in fp32 on the CPU; up to near-ties elsewhere.

The two modes run the same requests in different batches: a zombie row moves a
step into another batch bucket. The CPU's fp32 kernels compute a row alike
whatever batch it shares, so there the outputs must be identical token for token.
On CUDA, and in bf16/fp16, GEMMs are not batch-invariant (the reduction order
depends on the batch shape), so a near-tie can flip. Per bench row this reports
the share of sequences identical across every run of both modes and, for each
other one, the first divergent position and the margin there between the two
tokens the runs chose, in the sampler's own score (the logit for a greedy row;
scaled logit plus that token's Gumbel noise for a sampled one), from a reference
forward of the common prefix. A divergence is a *near-tie* when the two tokens
score within ``ulps`` units in the last place of the dtype (at the top score's
magnitude) of each other; only a divergence that is not fails the bench. The
reference is a prefill of the whole context, another kernel path than the runs'
decode over their KV pages: after ~100 bf16 tokens on an H200 it preferred a third
token by ~0.75 while the runs' two tokens scored 0.0009 apart (docs/gpu.md). How
far its own best lies above the two is reported (``reference_lead``), not judged.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

EPS = {"float32": 2.0 ** -23, "bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}   # spacing just above 1.0
NEAR_TIE_ULPS = 8


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """The first generated position where ``a`` and ``b`` differ (one ending early counts), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True, slots=True)
class Divergence:
    request: int               # index in the workload
    run: str                   # the run that differs from the reference run
    position: int              # first generated position that differs
    tokens: tuple[int, int]    # (reference run's, this run's) token there; -1 where one had ended
    margin: float | None       # |score difference| of the two tokens (None: not computed)
    threshold: float | None    # the near-tie bound at this position
    near_tie: bool
    reference_lead: float | None = None   # the reference's best score above the better of the two


@dataclass
class Equality:
    """One bench row's verdict on blocking against pipelined outputs."""
    requests: int
    identical: int             # requests whose tokens are equal in every run of both modes
    exact: bool                # fp32 on the CPU: any divergence fails
    dtype: str
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.identical / self.requests if self.requests else 1.0

    @property
    def ok(self) -> bool:
        if self.exact:
            return not self.divergences
        return all(d.near_tie for d in self.divergences)

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "identical": self.identical, "share": self.share, "exact": self.exact,
                "dtype": self.dtype, "ok": self.ok, "divergences": [asdict(d) for d in self.divergences]}


ScoreFn = Callable[[list[int], int, Any], "list[float]"]   # (context, request index, params) -> per-token scores


def compare_runs(runs: dict[str, list[list[int]]], prompts: list[list[int]], params: list[Any], *, exact: bool,
                 dtype: str, scores: ScoreFn | None, ulps: int = NEAR_TIE_ULPS) -> Equality:
    """``runs``: run name -> per-request generated tokens (the first is the reference);
    ``prompts``: per-request prompt token ids; ``scores`` gives the reference forward's
    sampler scores for a context (None: margins are not computed)."""
    names = list(runs)
    ref = runs[names[0]]
    eq = Equality(requests=len(ref), identical=0, exact=exact, dtype=dtype)
    for i in range(len(ref)):
        diverged = False
        for name in names[1:]:
            pos = first_divergence(ref[i], runs[name][i])
            if pos is None:
                continue
            diverged = True
            a = ref[i][pos] if pos < len(ref[i]) else -1
            b = runs[name][i][pos] if pos < len(runs[name][i]) else -1
            margin = threshold = lead = None
            near = False
            if scores is not None and a >= 0 and b >= 0:
                s = scores(prompts[i] + ref[i][:pos], i, params[i])
                top = max(s)
                threshold = ulps * EPS.get(dtype, EPS["float32"]) * max(1.0, abs(top))
                margin = abs(s[a] - s[b])
                lead = top - max(s[a], s[b])
                near = math.isfinite(margin) and margin <= threshold
            eq.divergences.append(Divergence(i, name, pos, (a, b), margin, threshold, near, lead))
        eq.identical += not diverged
    return eq


class ReferenceScores:
    """The sampler's scores of the next token after a context, from one prefill forward of
    the engine's own model (in-process on CUDA; loaded once on the CPU for the
    host-process device, whose model lives in its worker)."""

    def __init__(self, engine) -> None:
        import torch

        program = getattr(engine.device, "program", None)
        if program is not None:
            self.model = program.model
        else:
            from photon_trace.engine.model.loader import load_model

            self.model = load_model(engine.config.model, dtype=engine.config.resolved_dtype(), device="cpu",
                                    seed=engine.config.weights_seed).model
        self.page_size = engine.config.page_size
        self.torch = torch

    def __call__(self, context: list[int], index: int, params) -> list[float]:
        from photon_trace.engine.device.sampling import uniform_noise
        from photon_trace.engine.model.batch import make_forward_batch
        from photon_trace.engine.model.kv_pool import KVPool

        torch, model = self.torch, self.model
        pages = -(-len(context) // self.page_size)
        kv = KVPool(model.config, pages + 1, self.page_size, dtype=model.dtype, device=model.device)
        batch = make_forward_batch([(context, 0, list(range(1, pages + 1)))], self.page_size, device=model.device)
        with torch.inference_mode():
            logits = model.forward(batch, kv)[0].float()
            if params.temperature > 0:
                seed = torch.tensor([params.seed], dtype=torch.int64, device=model.device)
                pos = torch.tensor([len(context)], dtype=torch.int64, device=model.device)
                noise = uniform_noise(seed, pos, logits.shape[-1])[0]
                logits = logits / params.temperature - torch.log(-torch.log(noise))
        return logits.cpu().tolist()
