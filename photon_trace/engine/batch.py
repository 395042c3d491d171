"""ForwardBatch: how one forward's work is described to the model.

Flat tensors only, with shapes the host knows without reading any device value,
so the same call serves prefill chunks and single-token decode and a decode
batch (``max_query_len == 1``) can be captured in a CUDA graph.

Page 0 of the KV pool is reserved as a scratch page: padding rows point at it
(``page_table`` row of zeros, ``context_lens`` 1, ``slot_mapping`` 0) so a
padded batch never reads or writes a live sequence's pages.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(slots=True)
class ForwardBatch:
    token_ids: torch.Tensor     # (T,) int64  input tokens, flat over rows
    positions: torch.Tensor     # (T,) int64  position of each token in its sequence
    slot_mapping: torch.Tensor  # (T,) int64  flat KV index page * page_size + offset where the token's K/V go
    page_table: torch.Tensor    # (B, P) int32 pages of each row, padded with 0
    context_lens: torch.Tensor  # (B,) int32  KV length of each row after this forward (new tokens included)
    query_start: torch.Tensor   # (B+1,) int32 row b's tokens are token_ids[query_start[b]:query_start[b+1]]
    logits_index: torch.Tensor  # (B,) int64  index into T of the token whose logits row b returns
    max_query_len: int          # host-known; 1 means pure decode

    @property
    def num_rows(self) -> int:
        return self.context_lens.shape[0]

    @property
    def num_tokens(self) -> int:
        return self.token_ids.shape[0]
