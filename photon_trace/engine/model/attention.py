"""Grouped-query attention over the paged KV cache.

Every index and mask is computed on the device from the batch's tensors, with
shapes that depend only on host-known ints (T tokens, B rows, P pages per row,
max_query_len), so a forward never waits for the device and a decode forward can
be captured in a CUDA graph. Per forward, :func:`build_metadata` computes:

- which pool pages each row reads (gathered as (B, P * page_size) keys),
- a padded (B, max_query_len) layout of the flat query tokens and the way back,
- one additive mask: key j is visible to a query at position p of row b iff
  j <= p and j < context_lens[b]; for models with a sliding window (Mistral), a
  second one that also needs j > p - window (transformers' rule), which the
  windowed layers use. Pages that fell out of the window are kept and masked.

Key 0 is always visible (positions are >= 0 and context_lens >= 1), so no query
row is fully masked and padding rows yield finite garbage, never NaN.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from photon_trace.engine.model.batch import ForwardBatch
from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.layers import Linear, RMSNorm
from photon_trace.engine.model.rope import apply_rope


@dataclass(slots=True)
class AttentionMetadata:
    slot_mapping: torch.Tensor       # (T,) int64 flat pool slot each new K/V goes to
    page_index: torch.Tensor         # (B * P,) int64 pages to gather, row-major
    mask: torch.Tensor               # (B, 1, Lq, S) additive, 0 or -inf, in the dtype SDPA runs in
    window_mask: torch.Tensor | None  # the same with the sliding window applied; None without one
    query_index: torch.Tensor | None  # (B, Lq) int64 flat token of each padded query; None in decode
    output_index: torch.Tensor | None  # (T,) int64 padded slot b * Lq + i of each flat token; None in decode
    num_rows: int                    # B
    max_query_len: int               # Lq
    num_keys: int                    # S = P * page_size
    # A mixed batch's runs of rows, attended apart: (tok_lo, tok_hi, metadata of the run).
    parts: tuple[tuple[int, int, "AttentionMetadata"], ...] = ()


def build_metadata(batch: ForwardBatch, page_size: int, dtype: torch.dtype,
                   window: int | None = None) -> AttentionMetadata:
    """Device-side indices and masks shared by all layers of one forward."""
    if batch.segments:
        parts = tuple((g.tok_lo, g.tok_hi, _build(_segment(batch, g), page_size, dtype, window))
                      for g in batch.segments)
        return AttentionMetadata(
            slot_mapping=batch.slot_mapping.long(), page_index=None, mask=None, window_mask=None,
            query_index=None, output_index=None, num_rows=batch.num_rows, max_query_len=batch.max_query_len,
            num_keys=0, parts=parts)
    return _build(batch, page_size, dtype, window)


def _segment(batch: ForwardBatch, g) -> ForwardBatch:
    """Rows [row_lo, row_hi) as a batch of their own: slices by host ints, one subtraction."""
    return ForwardBatch(
        token_ids=batch.token_ids[g.tok_lo:g.tok_hi], positions=batch.positions[g.tok_lo:g.tok_hi],
        slot_mapping=batch.slot_mapping[g.tok_lo:g.tok_hi],
        page_table=batch.page_table[g.row_lo:g.row_hi, :g.pages],
        context_lens=batch.context_lens[g.row_lo:g.row_hi],
        query_start=batch.query_start[g.row_lo:g.row_hi + 1] - g.tok_lo,
        logits_index=batch.logits_index[g.row_lo:g.row_hi], max_query_len=g.max_query_len)


def _build(batch: ForwardBatch, page_size: int, dtype: torch.dtype, window: int | None) -> AttentionMetadata:
    num_rows, pages_per_row = batch.page_table.shape
    num_tokens, lq = batch.num_tokens, batch.max_query_len
    num_keys = pages_per_row * page_size
    device = batch.token_ids.device
    key_pos = torch.arange(num_keys, device=device)                      # (S,)
    if lq == 1:
        if num_tokens != num_rows:
            raise ValueError(f"a decode batch (max_query_len 1) needs one token per row: "
                             f"{num_tokens} tokens, {num_rows} rows")
        query_index = output_index = None
        query_pos = batch.positions.view(num_rows, 1)                    # (B, 1)
    else:
        starts = batch.query_start.long()                                # (B+1,)
        offsets = torch.arange(lq, device=device)                        # (Lq,)
        # Slots past a row's last token borrow a real token: finite, and never read back.
        query_index = (starts[:-1, None] + offsets).clamp_(max=num_tokens - 1)  # (B, Lq)
        query_pos = batch.positions[query_index]                         # (B, Lq)
        token = torch.arange(num_tokens, device=device)                  # (T,)
        row = torch.searchsorted(starts[1:], token, right=True)          # (T,)
        output_index = row * lq + (token - starts[row])                  # (T,)
    query_pos = query_pos[:, :, None]                                    # (B, Lq, 1)
    visible = (key_pos <= query_pos) & (key_pos < batch.context_lens.view(num_rows, 1, 1))  # (B, Lq, S)
    mask = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill_(~visible, float("-inf"))
    window_mask = None
    if window is not None:
        # the query itself stays visible (window >= 1), so no row is fully masked here either
        outside = ~visible | (key_pos <= query_pos - window)
        window_mask = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill_(outside, float("-inf"))
        window_mask = window_mask[:, None]                               # (B, 1, Lq, S)
    return AttentionMetadata(
        slot_mapping=batch.slot_mapping.long(),
        page_index=batch.page_table.reshape(-1).long(),
        mask=mask[:, None],                                              # (B, 1, Lq, S)
        window_mask=window_mask,
        query_index=query_index,
        output_index=output_index,
        num_rows=num_rows,
        max_query_len=lq,
        num_keys=num_keys,
    )


class PagedAttention(nn.Module):
    """QKV projection, optional q/k norm, RoPE, paged KV write + read, SDPA, output projection."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                 windowed: bool = False) -> None:
        super().__init__()
        self.windowed = windowed        # this layer attends through the sliding window
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        self.q_size, self.kv_size = config.q_size, config.kv_size
        # Rows [0, q) are q_proj, [q, q+kv) k_proj, [q+kv, q+2kv) v_proj: q and k sit
        # next to each other so one RoPE call rotates both.
        self.qkv = Linear(config.hidden_size, self.q_size + 2 * self.kv_size, config.qkv_bias, dtype, device)
        self.o_proj = Linear(self.q_size, config.hidden_size, config.o_bias, dtype, device)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, dtype, device) if config.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, dtype, device) if config.qk_norm else None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, meta: AttentionMetadata,
                k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        """x (T, hidden); k_cache/v_cache this layer's (num_pages, page_size, Hkv, D) pool slices."""
        t = x.shape[0]
        h, hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        qkv = self.qkv(x)                                                # (T, (H + 2Hkv) * D)
        if self.q_norm is None:
            qk = qkv[:, : self.q_size + self.kv_size].view(t, h + hkv, d)  # (T, H + Hkv, D)
            qk = apply_rope(qk, cos, sin)
            q, k = qk[:, :h], qk[:, h:]                                  # (T, H, D), (T, Hkv, D)
        else:
            q = self.q_norm(qkv[:, : self.q_size].view(t, h, d))         # (T, H, D)
            k = self.k_norm(qkv[:, self.q_size: self.q_size + self.kv_size].view(t, hkv, d))  # (T, Hkv, D)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        v = qkv[:, self.q_size + self.kv_size:].view(t, hkv, d)          # (T, Hkv, D)

        # Write this forward's K/V first: a row's new tokens attend to each other through the pool.
        k_cache.view(-1, hkv, d).index_copy_(0, meta.slot_mapping, k)
        v_cache.view(-1, hkv, d).index_copy_(0, meta.slot_mapping, v)
        if meta.parts:
            out = torch.cat([self._attend(q[t0:t1], part, k_cache, v_cache) for t0, t1, part in meta.parts])
        else:
            out = self._attend(q, meta, k_cache, v_cache)
        return self.o_proj(out.to(x.dtype))

    def _attend(self, q: torch.Tensor, meta: AttentionMetadata, k_cache: torch.Tensor,
                v_cache: torch.Tensor) -> torch.Tensor:
        """q (t, H, D) of rows laid out by ``meta`` -> attention output (t, H * D)."""
        t = q.shape[0]
        h, hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        b, s, lq = meta.num_rows, meta.num_keys, meta.max_query_len
        keys = k_cache.index_select(0, meta.page_index).view(b, s, hkv, d)    # (B, S, Hkv, D)
        values = v_cache.index_select(0, meta.page_index).view(b, s, hkv, d)  # (B, S, Hkv, D)

        if meta.query_index is None:
            q = q.view(b, h, 1, d)                                       # (B, H, 1, D)
        else:
            q = q[meta.query_index].transpose(1, 2)                      # (B, H, Lq, D)
        keys, values = keys.transpose(1, 2), values.transpose(1, 2)      # (B, Hkv, S, D) views
        if meta.mask.dtype != q.dtype:
            # CPU: the fp32 SDPA kernel is several times faster than bf16/fp16 ones at decode.
            q, keys, values = q.float(), keys.float(), values.float()
        mask = meta.window_mask if self.windowed else meta.mask
        out = F.scaled_dot_product_attention(
            q, keys, values, attn_mask=mask, enable_gqa=hkv != h)       # (B, H, Lq, D)
        if meta.query_index is None:
            return out.reshape(t, h * d)                                 # (T, H * D)
        return out.transpose(1, 2).reshape(b * lq, h * d)[meta.output_index]  # (T, H * D)
