"""min-p on the device, beside top-k and top-p: the kept set is transformers' (``MinPLogitsWarper``)
or, with top-p, a reference in vLLM's order written here; the draws follow the renormalised
distribution; every path draws the same token; the engine draws the same tokens at depth 1
and depth 2, and every token it draws passes min-p under the model's own logits."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import MinPLogitsWarper, TopKLogitsWarper

from photon_trace.engine.device.sampling import SamplePath, SamplingMode, sample, sampling_mode
from photon_trace.engine.model.batch import make_forward_batch
from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.model.loader import load_model
from photon_trace.engine.params import SamplingParams
from helpers.engine_helpers import tiny_engine
from helpers.reference_generate import generate as reference_generate

PROMPTS = [[5, 9, 200, 31, 7], [100, 101, 102], [42] * 11]


def _draws(logits: torch.Tensor, n: int, *, temp: float = 1.0, k: int = 0, p: float = 1.0, min_p: float,
           mode: SamplingMode | None = None) -> torch.Tensor:
    """``n`` draws (seeds 0..n-1) from one row of logits."""
    mode = mode or sampling_mode([SamplingParams(temperature=temp, top_k=k, top_p=p, min_p=min_p)])
    return sample(logits.repeat(n, 1), torch.full((n,), temp), torch.full((n,), k), torch.full((n,), p),
                  torch.arange(n), torch.full((n,), 17), mode, min_p=torch.full((n,), min_p))


def _vllm_order_reference(logits: np.ndarray, temp: float, min_p: float, top_p: float) -> np.ndarray:
    """The distribution vLLM samples from: softmax(logits / T), drop p_i < min_p * p_max,
    renormalise, keep the smallest most-likely prefix whose mass reaches top_p (ties kept),
    renormalise. Written from the definitions, in float64."""
    z = logits / temp
    probs = np.exp(z - z.max())
    probs /= probs.sum()
    probs = np.where(probs >= min_p * probs.max(), probs, 0.0)
    probs /= probs.sum()
    order = np.sort(probs)[::-1]
    before = np.cumsum(order) - order
    last = order[(before < top_p).sum() - 1]
    probs = np.where(probs >= last, probs, 0.0)
    return probs / probs.sum()


def test_min_p_keeps_what_transformers_keeps_and_draws_in_proportion():
    logits = torch.randn(1, 64, generator=torch.Generator().manual_seed(3)) * 2
    n = 20000
    for temp, min_p, k in ((1.0, 0.1, 0), (0.7, 0.3, 0), (1.5, 0.05, 8)):
        warped = MinPLogitsWarper(min_p)(None, TopKLogitsWarper(k)(None, logits / temp) if k else logits / temp)
        allowed = set(torch.isfinite(warped[0]).nonzero()[:, 0].tolist())
        got = _draws(logits, n, temp=temp, k=k, min_p=min_p)
        assert set(got.tolist()) == allowed, f"T={temp}, min_p={min_p}, k={k}"
        expect = torch.softmax(warped[0], -1)
        freq = torch.bincount(got, minlength=64) / n
        assert torch.allclose(freq, expect, atol=0.015), f"T={temp}, min_p={min_p}, k={k}"
    unfiltered = set(_draws(logits, n, min_p=0.0).tolist())
    assert len(unfiltered) > len(allowed) + 10, "min-p removed nothing: the test would not notice it missing"


def test_min_p_with_top_p_follows_vllm_order():
    """min-p first, then top-p over what min-p kept (transformers applies top-p first)."""
    logits = torch.log(torch.tensor([[0.30, 0.25, 0.20, 0.10, 0.08, 0.04, 0.03]]))
    n = 20000
    expect = _vllm_order_reference(logits[0].double().numpy(), 1.0, 0.3, 0.8)
    assert (expect > 0).sum() == 3     # min-p keeps 4 (p >= 0.09); top-p 0.8 of those keeps 3
    got = _draws(logits, n, p=0.8, min_p=0.3)
    freq = (torch.bincount(got, minlength=7) / n).double().numpy()
    assert set(got.tolist()) == set(np.nonzero(expect)[0].tolist())
    assert np.allclose(freq, expect, atol=0.015)


def test_every_path_draws_the_same_token_with_min_p():
    logits = torch.randn(1, 300, generator=torch.Generator().manual_seed(5)) * 3
    for k, p in ((0, 1.0), (5, 1.0), (0, 0.9), (7, 0.9)):
        natural = _draws(logits, 500, temp=0.9, k=k, p=p, min_p=0.2)
        assert torch.equal(natural, _draws(logits, 500, temp=0.9, k=k, p=p, min_p=0.2,
                                           mode=SamplingMode(SamplePath.SORT, min_p=True)))
    # a batch with a min-p row beside an unfiltered one: each draws as it would alone
    alone = _draws(logits, 1, temp=0.9, min_p=0.0)
    mode = sampling_mode([SamplingParams(temperature=0.9), SamplingParams(temperature=0.9, min_p=0.5)])
    assert mode.min_p and mode.path == SamplePath.PLAIN
    pair = sample(logits.repeat(2, 1), torch.full((2,), 0.9), torch.zeros(2, dtype=torch.long), torch.ones(2),
                  torch.zeros(2, dtype=torch.long), torch.full((2,), 17), mode, min_p=torch.tensor([0.0, 0.5]))
    assert pair[0] == alone[0] and pair[1] == _draws(logits, 1, temp=0.9, min_p=0.5)[0]


def test_min_p_is_validated_and_a_greedy_row_ignores_it():
    for bad in (-0.1, 1.5, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match="min_p"):
            SamplingParams(min_p=bad)
    assert not sampling_mode([SamplingParams(min_p=0.5)]).min_p          # greedy: nothing to filter
    assert not sampling_mode([SamplingParams(temperature=1.0)]).min_p


@pytest.fixture(scope="module")
def engines():
    blocking, pipelined = tiny_engine(1, seed=0), tiny_engine(2, seed=0)
    yield blocking, pipelined
    blocking.close()
    pipelined.close()


def test_the_engine_draws_the_same_tokens_at_both_depths_and_each_passes_min_p(engines):
    tiny = load_model("tiny")
    temp, min_p = 1.5, 0.5
    params = SamplingParams(temperature=temp, min_p=min_p, seed=1234, max_tokens=24, ignore_eos=True)
    runs = [[o.token_ids for o in engine.generate(PROMPTS, params)] for engine in engines]
    assert runs[0] == runs[1]
    free = [o.token_ids for o in engines[1].generate(PROMPTS, SamplingParams(
        temperature=temp, seed=1234, max_tokens=24, ignore_eos=True))]

    def violations(prompt, tokens) -> int:
        """Tokens drawn with p < min_p * p_max under the model's logits at temperature ``temp``."""
        seq = prompt + tokens
        pages = list(range(1, -(-len(seq) // 16) + 1))
        kv = KVPool(tiny.config, len(pages) + 1, 16)
        with torch.inference_mode():
            logits = tiny.model(make_forward_batch([(seq, 0, pages)], 16), kv, all_logits=True)
        warped = MinPLogitsWarper(min_p)(None, logits[len(prompt) - 1:-1].float() / temp)
        return int((~torch.isfinite(warped.gather(1, torch.tensor(tokens)[:, None]))).sum())

    assert sum(violations(p, t) for p, t in zip(PROMPTS, runs[1])) == 0
    assert sum(violations(p, t) for p, t in zip(PROMPTS, free)) > 0, "min-p would not have been noticed missing"


def test_min_p_one_is_greedy_at_any_temperature(engines):
    """Only tokens as likely as the likeliest survive min_p = 1: the host's greedy reference."""
    tiny = load_model("tiny")
    expect = reference_generate(tiny.model, tiny.tokenizer, PROMPTS, max_new_tokens=16, stop_on_eos=False).token_ids
    for engine in engines:
        got = engine.generate(PROMPTS, SamplingParams(temperature=2.0, min_p=1.0, seed=7, max_tokens=16,
                                                      ignore_eos=True))
        assert [o.token_ids for o in got] == expect, f"depth {engine.config.depth}"


def test_generation_config_min_p_is_a_default(tmp_path):
    """As in vLLM, a checkpoint's generation_config.json min_p applies to requests that leave it unset."""
    import json

    from photon_trace.engine.model.checkpoint import generation_defaults

    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.7, "min_p": 0.05}))
    defaults = generation_defaults(tmp_path)
    assert defaults == {"temperature": 0.7, "min_p": 0.05}
    assert SamplingParams.with_defaults(defaults, min_p=None).min_p == 0.05
    assert SamplingParams.with_defaults(defaults, min_p=0.2).min_p == 0.2
