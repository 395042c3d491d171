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


def _chi2_independence(a, b, V: int) -> tuple[float, float]:
    """Pearson's chi-square of the V x V table of pairs, and its critical value at p ~ 1e-6
    (Wilson-Hilferty approximation, z = 4.75, df = (V - 1)^2)."""
    import numpy as np

    table = np.zeros((V, V))
    np.add.at(table, (a, b), 1)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    df = (V - 1) ** 2
    h = 2 / (9 * df)
    return float(((table - expected) ** 2 / expected).sum()), df * (1 - h + 4.75 * h ** 0.5) ** 3


def test_consecutive_seeds_and_positions_draw_independently():
    """Noise for (seed + 1, id) must not be noise for (seed, id + 1): with near-uniform logits
    the old seed + id mixing gave token t - 1 after token t 89% of the time (chi-square 246,832)."""
    N, V = 40000, 16
    logits = torch.zeros(N, V)
    t, k, p = torch.ones(N), torch.zeros(N, dtype=torch.long), torch.ones(N)
    by_seed = sample(logits, t, k, p, torch.arange(N), torch.full((N,), 42), PLAIN).numpy()
    a, b = by_seed[0::2], by_seed[1::2]                  # seeds 2j and 2j + 1, same position
    chi2, critical = _chi2_independence(a, b, V)
    assert chi2 < critical, f"seeds: chi-square {chi2:.0f} >= {critical:.0f}"
    assert abs(((b - a) % V == V - 1).mean() - 1 / V) < 0.01
    by_pos = sample(logits, t, k, p, torch.full((N,), 7), torch.arange(N), PLAIN).numpy()
    chi2, critical = _chi2_independence(by_pos[0::2], by_pos[1::2], V)   # positions 2j, 2j + 1, one seed
    assert chi2 < critical, f"positions: chi-square {chi2:.0f} >= {critical:.0f}"
    for draws in (by_seed, by_pos):   # and each marginal is still the (uniform) softmax
        freq = torch.bincount(torch.from_numpy(draws), minlength=V) / N
        assert torch.allclose(freq, torch.full((V,), 1 / V), atol=0.01)


def test_penalties_follow_openai_and_logprobs_are_log_softmax():
    from photon_trace.engine.device.sampling import logprobs, penalize

    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    counts = torch.tensor([[0.0, 1.0, 3.0, 0.0]])
    out = penalize(logits, counts, torch.tensor([0.5]), torch.tensor([0.25]))
    assert torch.equal(out, torch.tensor([[1.0, 2.0 - 0.25 - 0.5, 3.0 - 0.75 - 0.5, 4.0]]))
    chosen, ids, values = logprobs(logits, torch.tensor([2]), 3)
    expect = torch.log_softmax(logits, -1)
    assert torch.allclose(chosen, expect[:, 2]) and ids.tolist() == [[3, 2, 1]]
    assert torch.allclose(values, expect[:, [3, 2, 1]])
    assert logprobs(logits, torch.tensor([0]), 0)[1] is None


def test_sampling_params_are_validated_on_the_host():
    import math

    import pytest

    bad = [dict(temperature=-1), dict(temperature=math.inf), dict(temperature=math.nan), dict(temperature="1"),
           dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-1), dict(top_k=2.5), dict(top_k=True),
           dict(max_tokens=0), dict(seed=-1), dict(seed=2**63), dict(seed=1.0), dict(presence_penalty=2.5),
           dict(frequency_penalty=-2.01), dict(frequency_penalty=math.nan), dict(logprobs=21), dict(logprobs=-1),
           dict(stop=("",)), dict(stop="x"), dict(stop_token_ids=(-1,)), dict(stop_token_ids=("a",)),
           dict(ignore_eos=1)]
    for kw in bad:
        with pytest.raises(ValueError, match=next(iter(kw)).split("_token")[0]):
            SamplingParams(**kw)
    # top_k past the vocabulary keeps every token (clipped by the engine, which knows the vocabulary)
    assert SamplingParams(temperature=1.0, top_k=2**63).for_vocab(100).top_k == 0
    assert SamplingParams(temperature=1.0, top_k=7).for_vocab(100).top_k == 7
    # a temperature too small to divide by is greedy
    assert SamplingParams(temperature=1e-40).greedy and sampling_mode([SamplingParams(temperature=1e-40)]) == GREEDY
