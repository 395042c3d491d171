"""Device sampling: every path draws the same token, the draw follows the distribution,
and top-k / top-p keep exactly the tokens they should."""
from __future__ import annotations

import torch

from photon_trace.engine.params import SamplingParams
from photon_trace.engine.device.sampling import (GREEDY, PLAIN, SORT, TOP_P, SamplePath, SamplingMode, sample,
                                                 sampling_mode)


def _args(B, temp=0.8, k=0, p=1.0):
    return (torch.full((B,), temp), torch.full((B,), k, dtype=torch.long), torch.full((B,), p),
            torch.arange(B) * 7919, torch.full((B,), 42))


def test_paths_agree_token_for_token():
    logits = torch.randn(16, 2560, generator=torch.Generator().manual_seed(0)) * 3
    t, k, p, s, pos = _args(16)
    assert torch.equal(sample(logits, t, k, p, s, pos, PLAIN), sample(logits, t, k, p, s, pos, SORT))
    assert torch.equal(sample(logits, t, k, p, s, pos, PLAIN), sample(logits, t, k, p, s, pos, TOP_P))
    p9 = torch.full((16,), 0.9)
    assert torch.equal(sample(logits, t, k, p9, s, pos, TOP_P), sample(logits, t, k, p9, s, pos, SORT))
    k5 = torch.full((16,), 5)
    via_topk = sample(logits, t, k5, p, s, pos, SamplingMode(SamplePath.TOP_K, 5))
    assert torch.equal(via_topk, sample(logits, t, k5, p, s, pos, SORT))
    assert torch.equal(via_topk, sample(logits, t, k5, p, s, pos, SamplingMode(SamplePath.TOP_K, 64)))


def test_draws_follow_the_distribution():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]])).repeat(4000, 1)
    t, k, p, _, pos = _args(4000, temp=1.0)
    seeds = torch.arange(4000)
    freq = torch.bincount(sample(logits, t, k, p, seeds, pos, PLAIN), minlength=3) / 4000
    assert torch.allclose(freq, torch.tensor([0.5, 0.3, 0.2]), atol=0.03)


def test_top_k_and_top_p_restrict_the_support():
    logits = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1]])).repeat(2000, 1)
    seeds = torch.arange(2000)
    t, _, _, _, pos = _args(2000, temp=1.0)
    topk = sample(logits, t, torch.full((2000,), 2), torch.ones(2000), seeds, pos, SamplingMode(SamplePath.TOP_K, 2))
    assert set(topk.tolist()) == {0, 1}
    topp = sample(logits, t, torch.zeros(2000, dtype=torch.long), torch.full((2000,), 0.65), seeds, pos, TOP_P)
    assert set(topp.tolist()) == {0, 1}   # 0.4 + 0.3 reaches 0.65; 0.2 is outside the nucleus


def test_masked_tokens_are_never_drawn_and_greedy_is_argmax():
    logits = torch.randn(8, 100)
    logits[:, 10:] = float("-inf")
    t, k, p, s, pos = _args(8, temp=1.5)
    assert (sample(logits, t, k, p, s, pos, PLAIN) < 10).all()
    assert torch.equal(sample(logits, *_args(8, temp=0.0)[:4], pos, GREEDY), logits.argmax(-1))


def test_mode_is_the_cheapest_exact_path():
    g, hot = SamplingParams(), SamplingParams(temperature=1.0)
    assert sampling_mode([g, None]) == GREEDY
    assert sampling_mode([g, hot]) == PLAIN
    assert sampling_mode([SamplingParams(temperature=1.0, top_k=7), SamplingParams(temperature=1.0, top_k=3)]) == \
        SamplingMode(SamplePath.TOP_K, 7)
    assert sampling_mode([hot, SamplingParams(temperature=1.0, top_k=3)]) == SORT
    assert sampling_mode([SamplingParams(temperature=1.0, top_p=0.9)]) == TOP_P
    assert sampling_mode([SamplingParams(temperature=1.0, top_p=0.9), SamplingParams(temperature=1.0, top_k=4)]) == SORT
