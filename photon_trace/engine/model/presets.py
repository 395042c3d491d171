"""Built-in models that need no files: a config, seeded random weights, ByteTokenizer.

Random weights are drawn with a larger spread than the usual std 0.02: at 0.02
the residual stream barely moves and greedy decoding repeats one token, which
hides bugs and makes benchmarks unrepresentative of real token streams.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.layers import Linear, RMSNorm
from photon_trace.engine.model.decoder import DecoderModel
from photon_trace.engine.model.tokenizer import EOS_ID

PRESET_VOCAB = 2560  # ByteTokenizer's 2307 ids, padded to a multiple of 128

PRESETS: dict[str, ModelConfig] = {
    # Tests: ~4M params, a forward in well under a millisecond per token.
    "tiny": ModelConfig(
        vocab_size=PRESET_VOCAB, hidden_size=256, intermediate_size=768, num_layers=4,
        num_heads=4, num_kv_heads=2, head_dim=64, rope_theta=10000.0, tie_embeddings=False,
        max_position=1024, eos_token_ids=(EOS_ID,), architecture="preset:tiny"),
    # Benchmarks: ~27M params (~107 MB in fp32), larger than the CPU's L3, so a
    # decode step is bound by memory bandwidth as on a GPU.
    "small": ModelConfig(
        vocab_size=PRESET_VOCAB, hidden_size=512, intermediate_size=1536, num_layers=8,
        num_heads=8, num_kv_heads=2, head_dim=64, rope_theta=10000.0, tie_embeddings=False,
        max_position=2048, eos_token_ids=(EOS_ID,), architecture="preset:small"),
    # Shaped like a 2B-class VLM's text decoder (hidden 2048, 24 layers, 32 heads,
    # MLP 8192, vocab 51200); with a SwiGLU MLP it holds ~1.8B params. GPU only.
    "1.5b": ModelConfig(
        vocab_size=51200, hidden_size=2048, intermediate_size=8192, num_layers=24,
        num_heads=32, num_kv_heads=32, head_dim=64, rope_theta=10000.0, tie_embeddings=False,
        max_position=4096, eos_token_ids=(EOS_ID,), architecture="preset:1.5b"),
}

# Presets too large for the host-process device: each 1.5b step reads ~7 GB of fp32 weights,
# so a bench on the CPU runs for many minutes. The command line refuses them without a GPU.
GPU_ONLY = frozenset({"1.5b"})

# Weight std = INIT_GAIN / sqrt(fan_in) for projections; embeddings get EMBED_STD.
INIT_GAIN = 1.0
EMBED_STD = 1.0
BIAS_STD = 0.02


def preset_config(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}") from None


@torch.no_grad()
def init_random_(model: DecoderModel, seed: int = 0) -> DecoderModel:
    """Fill every parameter from ``seed``, one generator per parameter (order-independent).

    Values are drawn in fp32, on the CPU for small models and on the model's
    device for large ones (the same seed gives the same weights on the same
    device type).
    """
    gen_device = model.device if model.config.param_count > 200_000_000 else torch.device("cpu")
    index = 0

    def fill(param: torch.Tensor, std: float) -> None:
        nonlocal index
        gen = torch.Generator(device=gen_device).manual_seed(seed * 1_000_003 + index)
        index += 1
        param.copy_(torch.randn(param.shape, generator=gen, device=gen_device) * std)

    for module in model.modules():
        if isinstance(module, Linear):
            fill(module.weight_t, INIT_GAIN / math.sqrt(module.in_features))
            if module.bias is not None:
                fill(module.bias, BIAS_STD)
        elif isinstance(module, nn.Embedding):
            fill(module.weight, EMBED_STD)
        elif isinstance(module, RMSNorm):
            module.weight.fill_(1.0)
    return model


def build_preset(name: str, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                 seed: int = 0) -> DecoderModel:
    """The preset's model with seeded random weights (built only when called)."""
    return init_random_(DecoderModel(preset_config(name), dtype=dtype, device=device), seed)
