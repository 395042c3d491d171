"""ModelConfig: the shape of a Llama-family decoder, validated once.

Every number the model, the KV pool and the cost model need comes from here, so
the derived figures (parameter count, bytes per token, FLOPs) are properties of
the config and need no instantiated weights.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

ROPE_TYPES = ("default", "linear", "llama3")


def dtype_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


@dataclass(frozen=True, slots=True)
class ModelConfig:
    vocab_size: int            # rows of the embedding and of the logits
    hidden_size: int           # width of the residual stream
    intermediate_size: int     # width of the SwiGLU MLP's hidden layer
    num_layers: int            # decoder blocks; also the first dim of the KV pool
    num_heads: int             # query heads
    num_kv_heads: int          # key/value heads (GQA: divides num_heads)
    head_dim: int              # per-head width; not always hidden_size / num_heads (Qwen3)
    rope_theta: float = 10000.0          # RoPE base frequency
    rope_scaling: dict | None = field(default=None, hash=False)  # None, linear {"factor"} or Llama 3's "llama3" dict
    rms_norm_eps: float = 1e-6           # RMSNorm epsilon, as the checkpoint was trained with
    tie_embeddings: bool = False         # lm_head shares the embedding matrix
    qkv_bias: bool = False               # q/k/v projections carry a bias (Qwen2)
    o_bias: bool = False                 # o_proj carries a bias (Llama/Qwen3 attention_bias=true)
    qk_norm: bool = False                # per-head RMSNorm on q and k before RoPE (Qwen3)
    max_position: int = 2048             # longest context the engine will run (prompt + generated)
    sliding_window: int | None = None    # Mistral-style local attention: a query sees this many keys at most
    sliding_layers: tuple[int, ...] = () # the layers that use the window (empty with a window: all of them)
    eos_token_ids: tuple[int, ...] = ()  # any of these ends a sequence
    architecture: str = "LlamaForCausalLM"  # where the config came from, for reports

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers",
                     "num_heads", "num_kv_heads", "head_dim", "max_position"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive int, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of "
                             f"num_kv_heads ({self.num_kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if not self.rope_theta > 0:
            raise ValueError(f"rope_theta must be positive, got {self.rope_theta!r}")
        if not self.rms_norm_eps > 0:
            raise ValueError(f"rms_norm_eps must be positive, got {self.rms_norm_eps!r}")
        if any(not isinstance(t, int) or not 0 <= t < self.vocab_size for t in self.eos_token_ids):
            raise ValueError(f"eos_token_ids {self.eos_token_ids!r} must be ints in [0, {self.vocab_size})")
        object.__setattr__(self, "eos_token_ids", tuple(self.eos_token_ids))
        self._check_window()
        self._check_rope_scaling()

    def _check_window(self) -> None:
        w = self.sliding_window
        if w is None:
            if self.sliding_layers:
                raise ValueError("sliding_layers without a sliding_window")
            return
        if not isinstance(w, int) or isinstance(w, bool) or w < 1:
            raise ValueError(f"sliding_window must be a positive int, got {w!r}")
        layers = tuple(self.sliding_layers) or tuple(range(self.num_layers))
        if any(not 0 <= i < self.num_layers for i in layers):
            raise ValueError(f"sliding_layers {layers} must lie in [0, {self.num_layers})")
        object.__setattr__(self, "sliding_layers", layers)

    def layer_window(self, layer: int) -> int | None:
        """The attention window of a layer (None: full causal attention)."""
        return self.sliding_window if layer in self.sliding_layers else None

    def _check_rope_scaling(self) -> None:
        s = self.rope_scaling
        if s is None:
            return
        kind = s.get("rope_type", s.get("type", "default"))
        if kind not in ROPE_TYPES:
            raise ValueError(f"unsupported rope_scaling type {kind!r}; supported: {ROPE_TYPES}")
        if kind == "default":
            return
        if not s.get("factor", 0) > 0:
            raise ValueError(f"rope_scaling {kind!r} needs a positive 'factor', got {s!r}")
        if kind == "llama3":
            missing = [k for k in ("low_freq_factor", "high_freq_factor",
                                   "original_max_position_embeddings") if k not in s]
            if missing:
                raise ValueError(f"rope_scaling 'llama3' is missing {missing}")
            if not s["high_freq_factor"] > s["low_freq_factor"]:
                raise ValueError("rope_scaling 'llama3' needs high_freq_factor > low_freq_factor")

    @property
    def rope_type(self) -> str:
        if self.rope_scaling is None:
            return "default"
        return self.rope_scaling.get("rope_type", self.rope_scaling.get("type", "default"))

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def layer_matmul_params(self) -> int:
        """Weights one token multiplies through in one block (projections and MLP)."""
        h = self.hidden_size
        attn = h * (self.q_size + 2 * self.kv_size) + self.q_size * h
        mlp = 3 * h * self.intermediate_size
        return attn + mlp

    @property
    def param_count(self) -> int:
        h = self.hidden_size
        per_layer = self.layer_matmul_params + 2 * h
        if self.qkv_bias:
            per_layer += self.q_size + 2 * self.kv_size
        if self.o_bias:
            per_layer += h
        if self.qk_norm:
            per_layer += 2 * self.head_dim
        embed = self.vocab_size * h
        head = 0 if self.tie_embeddings else self.vocab_size * h
        return embed + head + self.num_layers * per_layer + h

    def weight_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Bytes of all weights; what a bandwidth-bound decode step must read at least once."""
        return self.param_count * dtype_bytes(dtype)

    def kv_bytes_per_token(self, dtype: torch.dtype = torch.float32) -> int:
        """KV-cache bytes one token occupies across all layers (K and V)."""
        return 2 * self.num_layers * self.kv_size * dtype_bytes(dtype)

    @property
    def flops_per_token(self) -> int:
        """Matmul FLOPs of one token through the weights (2 per multiply-add), attention excluded."""
        return 2 * (self.num_layers * self.layer_matmul_params + self.vocab_size * self.hidden_size)

    def attention_flops_per_token(self, context_len: int) -> int:
        """FLOPs of one token's QK^T and PV against ``context_len`` keys, all layers."""
        return 4 * self.num_layers * self.q_size * context_len

    def describe(self) -> str:
        window = "" if self.sliding_window is None else (
            f", window {self.sliding_window} on {len(self.sliding_layers)}/{self.num_layers} layers")
        return (f"{self.architecture}: {self.param_count / 1e6:.1f}M params, {self.num_layers} layers, "
                f"hidden {self.hidden_size}, heads {self.num_heads}/{self.num_kv_heads}x{self.head_dim}, "
                f"vocab {self.vocab_size}, rope {self.rope_type}{window}")

