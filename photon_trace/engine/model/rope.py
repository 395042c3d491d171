"""Rotary position embeddings (RoPE) with the scaling variants Llama 3 and Qwen use.

The rotation is the half-split form (dims i and i + D/2 rotate together), which is
what Hugging Face checkpoints are laid out for.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from photon_trace.engine.model.config import ModelConfig


def rope_inv_freq(config: ModelConfig) -> torch.Tensor:
    """Inverse frequencies (head_dim/2,) fp32, with the config's rope scaling applied.

    Computed the way the reference implementation computes them (fp32 from an
    integer range) so logits agree to fp32 rounding.
    """
    dim = config.head_dim
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    kind = config.rope_type
    if kind == "linear":
        return inv_freq / config.rope_scaling["factor"]
    if kind == "llama3":
        s = config.rope_scaling
        factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old_len = s["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        # Long wavelengths (low frequencies) are slowed by `factor`, short ones kept,
        # and the band between is interpolated smoothly in 1/wavelength.
        scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        in_band = (wavelen >= old_len / high) & (wavelen <= old_len / low)
        return torch.where(in_band, smoothed, scaled)
    return inv_freq


class RotaryEmbedding(nn.Module):
    """Turns positions into the (cos, signed sin) pair every layer applies.

    Computed once per forward, from the positions tensor on the device, so no
    table sized by the maximum context is kept and nothing is read on the host.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.register_buffer("inv_freq", rope_inv_freq(config), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[:, None] * self.inv_freq[None, :]  # (T, D/2) fp32
        cos, sin = freqs.cos(), freqs.sin()
        cos = torch.cat((cos, cos), dim=-1).to(dtype)[:, None, :]    # (T, 1, D)
        # Sign folded in so that rotate_half(x) * sin == roll(x, D/2) * signed_sin.
        sin = torch.cat((-sin, sin), dim=-1).to(dtype)[:, None, :]   # (T, 1, D)
        return cos, sin


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (T, heads, D) by its tokens' angles; roll gives (x2, x1) in one op."""
    half = x.shape[-1] // 2
    return torch.addcmul(x * cos, torch.roll(x, shifts=half, dims=-1), signed_sin)
