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
from typing import Sequence

import torch

from photon_trace.engine.model.segments import Segment, row_segments


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
    segments: tuple[Segment, ...] = ()  # host-known runs attention handles apart (see row_segments)

    @property
    def num_rows(self) -> int:
        return self.context_lens.shape[0]

    @property
    def num_tokens(self) -> int:
        return self.token_ids.shape[0]


# One row of a forward: (new token ids, position of the first of them, the row's pages).
RowInput = tuple[Sequence[int], int, Sequence[int]]


def make_forward_batch(rows: Sequence[RowInput], page_size: int, pages_per_row: int | None = None,
                       device: torch.device | str = "cpu") -> ForwardBatch:
    """A ForwardBatch from host lists; each row's logits are those of its last new token."""
    width = pages_per_row if pages_per_row is not None else max(len(p) for _, _, p in rows)
    token_ids, positions, slots, page_table, context_lens, query_start, logits_index = [], [], [], [], [], [0], []
    for tokens, start, pages in rows:
        for offset, token in enumerate(tokens):
            pos = start + offset
            token_ids.append(token)
            positions.append(pos)
            slots.append(pages[pos // page_size] * page_size + pos % page_size)
        page_table.append([*pages, *[0] * (width - len(pages))])
        context_lens.append(start + len(tokens))
        query_start.append(query_start[-1] + len(tokens))
        logits_index.append(query_start[-1] - 1)

    def as_tensor(values: list, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    return ForwardBatch(
        token_ids=as_tensor(token_ids, torch.int64),
        positions=as_tensor(positions, torch.int64),
        slot_mapping=as_tensor(slots, torch.int64),
        page_table=as_tensor(page_table, torch.int32),
        context_lens=as_tensor(context_lens, torch.int32),
        query_start=as_tensor(query_start, torch.int32),
        logits_index=as_tensor(logits_index, torch.int64),
        max_query_len=max(len(t) for t, _, _ in rows),
        segments=row_segments([len(t) for t, _, _ in rows], [len(p) for _, _, p in rows]),
    )
