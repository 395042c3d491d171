"""Sampling on the device with no host synchronisation.

Randomness is counter-based: each row's noise is a hash of (seed, position of
the token being sampled, vocabulary id). A seeded request therefore draws the
same tokens whatever batch it shares, in either pipelining mode and on either
backend, and nothing stateful (a torch Generator) lives on the device.
Sampling is the exponential race: argmax(p_i / E_i) with E_i ~ Exp(1), which
selects i with probability p_i and needs no multinomial (a host sync on some
backends).
"""
from __future__ import annotations

import torch

# splitmix64 constants, as signed int64 (torch has no uint64 arithmetic on every backend).
_GOLDEN = -7046029254386353131   # 0x9E3779B97F4A7C15
_MIX1 = -4658895280553007687     # 0xBF58476D1CE4E5B9
_MIX2 = -7723592293110705685     # 0x94D049BB133111EB


def _shr(x: torch.Tensor, n: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's >> is arithmetic)."""
    return (x >> n) & ((1 << (64 - n)) - 1)


def uniform_noise(seed: torch.Tensor, pos: torch.Tensor, vocab: int) -> torch.Tensor:
    """(B, V) float32 in (0, 1), a pure function of (seed, pos, vocab id)."""
    ids = torch.arange(vocab, device=seed.device, dtype=torch.int64)
    x = (seed * _GOLDEN + pos * _MIX1)[:, None] + ids[None, :] * _GOLDEN  # (B, V), wraps mod 2^64
    x = (x ^ _shr(x, 30)) * _MIX1
    x = (x ^ _shr(x, 27)) * _MIX2
    x = x ^ _shr(x, 31)
    return (_shr(x, 40).to(torch.float32) + 0.5) * (1.0 / (1 << 24))


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
           top_p: torch.Tensor, seed: torch.Tensor, pos: torch.Tensor,
           all_greedy: bool) -> torch.Tensor:
    """Next token per row. (B, V) logits; per-row params (B,). Temperature 0 is greedy.

    ``all_greedy`` is host-known (from the requests' params) and skips the sort.
    Disallowed tokens arrive as -inf (constraint masks) and are never drawn.
    """
    logits = logits.float()
    greedy = logits.argmax(dim=-1)
    if all_greedy:
        return greedy
    B, V = logits.shape
    temp = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
    scaled = logits / temp[:, None]
    sorted_logits, order = scaled.sort(dim=-1, descending=True)  # (B, V)
    ranks = torch.arange(V, device=logits.device)[None, :]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, V))
    keep = ranks < k[:, None]
    probs = torch.softmax(sorted_logits.masked_fill(~keep, float("-inf")), dim=-1)
    # top-p: keep the smallest prefix whose mass reaches p (always at least one token)
    before = probs.cumsum(dim=-1) - probs
    keep = keep & (before < top_p[:, None])
    probs = torch.where(keep, probs, torch.zeros_like(probs))
    noise = uniform_noise(seed, pos, V).gather(1, order)  # noise follows the token, not its rank
    race = probs / -torch.log(noise)
    drawn = order.gather(1, race.argmax(dim=-1, keepdim=True)).squeeze(1)
    return torch.where(temperature > 0, drawn, greedy)
