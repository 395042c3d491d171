"""Applying a token bitmask to logits with torch ops only: no host sync, CPU or CUDA alike.

The one masking function: the device program's masked sampling calls it, and the
constraint tests check it against a numpy reference.
"""
from __future__ import annotations

from functools import cache

import torch


@cache
def _bit_shifts(device: torch.device) -> torch.Tensor:
    return torch.arange(32, dtype=torch.int32, device=device)  # (32,)


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(R, words) int32 in xgrammar's layout -> (R, vocab_size) bool, True where allowed."""
    # An arithmetic shift of a negative word sign-extends, but `& 1` keeps only the bit asked for.
    bits = (bitmask.unsqueeze(-1) >> _bit_shifts(bitmask.device)) & 1  # (R, words, 32)
    return bits.flatten(1)[:, :vocab_size].bool()                       # (R, V)


def apply_bitmask_(logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Set disallowed logits to -inf in place and return `logits`.

    logits: (B, V) float. bitmask: (B', words) int32 with B' >= B (a slot's buffer may have
    room for more rows), row b for logits row b (xgrammar's convention), bit i of word w
    allowing token 32 * w + i. rows: (R,) int64 indices of the
    rows to mask, on the logits' device; None masks every row. Other rows are untouched.
    Everything stays on the device: no boolean indexing, no `.item()`.
    """
    if logits.dim() != 2 or bitmask.dim() != 2 or bitmask.shape[0] < logits.shape[0]:
        raise ValueError(f"expected logits (B, V) and bitmask (>= B, words), got {tuple(logits.shape)} "
                         f"and {tuple(bitmask.shape)}")
    vocab_size = logits.shape[1]
    if bitmask.shape[1] * 32 < vocab_size:
        raise ValueError(f"bitmask of {bitmask.shape[1]} words cannot cover a vocabulary of {vocab_size}")
    if rows is None:
        allowed = unpack_bitmask(bitmask[: logits.shape[0]], vocab_size)  # (B, V)
        return logits.masked_fill_(~allowed, float("-inf"))
    allowed = unpack_bitmask(bitmask.index_select(0, rows), vocab_size)  # (R, V)
    masked = logits.index_select(0, rows).masked_fill_(~allowed, float("-inf"))  # (R, V)
    return logits.index_copy_(0, rows, masked)
