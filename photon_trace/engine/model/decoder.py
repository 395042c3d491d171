"""The Llama-family decoder over the paged KV cache.

One entry point, :meth:`DecoderModel.forward`, serves prefill chunks and decode
alike: it writes the batch's K/V into the pool, attends through page tables and
returns logits, optionally into a buffer the caller preallocated. It never reads
a device value on the host (no ``.item()``, no data-dependent shapes), so the
pipelined engine can launch the next forward before this one's results are
back, and a decode forward can be captured in a CUDA graph.
"""
from __future__ import annotations

import torch
from torch import nn

from photon_trace.engine.model.attention import AttentionMetadata, PagedAttention, build_metadata
from photon_trace.engine.model.batch import ForwardBatch
from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.model.layers import Linear, RMSNorm, SwiGLU
from photon_trace.engine.model.rope import RotaryEmbedding


class DecoderLayer(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                 windowed: bool = False) -> None:
        super().__init__()
        self.input_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype, device)
        self.attn = PagedAttention(config, dtype, device, windowed=windowed)
        self.post_attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype, device)
        self.mlp = SwiGLU(config.hidden_size, config.intermediate_size, dtype, device)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, meta: AttentionMetadata,
                k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.input_norm(x), cos, sin, meta, k_cache, v_cache)
        return x + self.mlp(self.post_attn_norm(x))


class DecoderModel(nn.Module):
    """Embedding, ``num_layers`` decoder blocks, final norm, LM head (tied or not).

    Weights are created uninitialised (``torch.empty``); a checkpoint or a preset
    fills them. They never require grad.
    """

    def __init__(self, config: ModelConfig, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu") -> None:
        super().__init__()
        if dtype not in (torch.float32, torch.bfloat16, torch.float16):
            raise ValueError(f"unsupported model dtype {dtype}; use float32, bfloat16 or float16")
        self.config = config
        self.dtype = dtype
        # Built on the meta device and then given uninitialised storage: no time is
        # spent on an init that a checkpoint or preset overwrites.
        meta = torch.device("meta")
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size, dtype=dtype, device=meta)
        self.layers = nn.ModuleList(DecoderLayer(config, dtype, meta, windowed=config.layer_window(i) is not None)
                                    for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype, meta)
        self.lm_head = None if config.tie_embeddings else Linear(
            config.hidden_size, config.vocab_size, bias=False, dtype=dtype, device=meta)
        self.to_empty(device=device)
        self.rope = RotaryEmbedding(config).to(self.embed.weight.device)
        self.requires_grad_(False)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    def forward(self, batch: ForwardBatch, kv: KVPool, out_logits: torch.Tensor | None = None,
                all_logits: bool = False) -> torch.Tensor:
        """Run one forward over ``batch``, reading and writing ``kv``.

        Returns logits (B, V) of each row's ``logits_index`` token, written into
        ``out_logits`` when given (any float dtype; (B, V) and on the model's
        device), or (T, V) logits of every token when ``all_logits`` (for tests).
        """
        if kv.dtype != self.dtype:
            raise ValueError(f"KV pool dtype {kv.dtype} differs from the model's {self.dtype}")
        # Attention runs in fp32 on CPU whatever the model dtype (see PagedAttention).
        attn_dtype = torch.float32 if self.device.type == "cpu" else self.dtype
        meta = build_metadata(batch, kv.page_size, attn_dtype, self.config.sliding_window)
        cos, sin = self.rope(batch.positions, self.dtype)              # (T, 1, D) each
        x = self.embed(batch.token_ids)                                # (T, hidden)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, meta, kv.k[i], kv.v[i])
        if not all_logits:
            x = x.index_select(0, batch.logits_index)                  # (B, hidden)
        x = self.norm(x)
        return self._logits(x, out_logits)

    def _logits(self, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        """(N, hidden) -> (N, V), into ``out`` when given (cast if its dtype differs)."""
        if out is not None and out.dtype != x.dtype:
            return out.copy_(self._logits(x, None))
        if self.lm_head is None:
            return torch.mm(x, self.embed.weight.t(), out=out)
        return self.lm_head(x, out=out)

    # Efficiency figures (computed here, exported elsewhere).

    @property
    def weight_bytes(self) -> int:
        """Bytes of the weights as instantiated (tied matrices counted once)."""
        return sum(p.numel() * p.element_size() for p in self.parameters())

    def decode_step_bytes(self, batch_size: int, context_len: int) -> int:
        """Least bytes a decode step must read: all weights once plus every row's KV."""
        return self.weight_bytes + batch_size * context_len * self.config.kv_bytes_per_token(self.dtype)

    def forward_flops(self, num_tokens: int, context_len: int) -> int:
        """Matmul FLOPs of ``num_tokens`` tokens each attending to ``context_len`` keys."""
        c = self.config
        return num_tokens * (c.flops_per_token + c.attention_flops_per_token(context_len))
