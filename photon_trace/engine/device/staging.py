"""The layout of one slot's host staging area, shared by both device backends.

A slot's staging area is one contiguous block of host memory (pinned on CUDA,
shared memory on the host-process device) holding every array the host writes
for a step and the landing zone of its copy-back. Both sides build numpy views
over the same block from this one layout, so there is no serialisation.

The device keeps a mirror of the same layout, so a launch stages its inputs in
**one** copy: bytes ``[0, stage_bytes(rows))`` of the block, every *staged*
field at once (on CUDA one DMA instead of ~17, and never a non-contiguous slice,
which torch would first gather into a hidden pageable temporary). The roles:

* staged (the default): written by the host before a launch, copied with it;
* ``UPLOADED_APART``: host -> device by an op of its own (the constraint mask,
  uploaded at finalize, after commit made its state current);
* ``COPIED_BACK``: device -> host landing zones (sampled tokens, their logprobs).

A new field needs no change here beyond ``fields()``: it is staged unless its
name is listed in one of the two sets. The layout puts staged fields first, in
declaration order but with per-row tables (2-D, ``max_rows`` first) after the
flat ones, so a step of B rows copies only the first B rows of the last table
(the page table: its width is the longest context's page count).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

UPLOADED_APART = frozenset({"mask"})       # host -> device by its own op (finalize's mask upload)
COPIED_BACK = frozenset({"out_tokens", "out_logprob", "out_top_ids", "out_top_logprobs"})  # device -> host landing zones, never staged


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotShape:
    """Capacities of a slot; fixed at start-up (no device allocation in the loop)."""
    max_rows: int      # rows (sequences) in one step
    max_tokens: int    # flat tokens in one step (prefill chunks + decode rows)
    max_pages: int     # page-table width: pages per row at the longest context
    mask_words: int    # int32 words of a constraint bitmask row
    top_logprobs: int = 20  # alternatives per token the copy-back can carry (OpenAI's limit)

    def fields(self) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
        R, T, P, W, K = self.max_rows, self.max_tokens, self.max_pages, self.mask_words, self.top_logprobs
        i64, i32, f32 = np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.float32)
        return [
            # per flat token
            ("tokens", i64, (T,)),         # prompt tokens; ignored where from_table
            ("token_row", i64, (T,)),      # device token-table row the token is read from
            ("from_table", np.dtype(np.bool_), (T,)),  # True: the input is the row's last sampled token
            ("positions", i64, (T,)),
            ("slot_mapping", i64, (T,)),
            # per row
            ("page_table", i32, (R, P)),
            ("context_lens", i32, (R,)),
            ("query_start", i32, (R + 1,)),
            ("logits_index", i64, (R,)),
            ("row_ids", i64, (R,)),        # token-table row the sampled token goes to (scratch row: discarded)
            ("temperature", f32, (R,)),
            ("top_k", i64, (R,)),
            ("top_p", f32, (R,)),
            ("min_p", f32, (R,)),          # 0: no min-p filter
            ("seed", i64, (R,)),
            ("sample_pos", i64, (R,)),     # index of the token being sampled: the seeded RNG's counter
            ("presence", f32, (R,)),       # presence penalty (0: none)
            ("frequency", f32, (R,)),      # frequency penalty (0: none)
            ("first_sample", np.dtype(np.bool_), (R,)),  # the sequence's first draw: its token counts restart
            ("mask", i32, (R, W)),         # allowed-token bitmask of constrained rows
            # device -> host (names start with "out_": host-only landing zones of the copy-back)
            ("out_tokens", i64, (R,)),
            ("out_logprob", f32, (R,)),    # log-probability of the sampled token (rows that ask)
            ("out_top_ids", i32, (R, K)),  # the likeliest tokens, best first
            ("out_top_logprobs", f32, (R, K)),
        ]

    def nbytes(self) -> int:
        *_, (offset, n, _, _) = layout(self).values()
        return _align(offset + n)

    def stage_bytes(self, rows: int) -> int:
        """Bytes a launch of ``rows`` rows copies host -> device: the staged fields,
        of the last (a per-row table) only its first ``rows`` rows."""
        start, per_row, end = _stage_extent(self)
        return start + per_row * rows if per_row else end


def _align(n: int, to: int = 64) -> int:
    return (n + to - 1) // to * to


class SlotStaging:
    """Numpy views of one slot's staging block (attribute per field; ``block``: all its bytes)."""

    def __init__(self, shape: SlotShape, buffer) -> None:
        self.shape = shape
        self.block = np.frombuffer(buffer, dtype=np.uint8, count=shape.nbytes())
        self.layout = layout(shape)
        for name, (offset, n, dt, fshape) in self.layout.items():
            setattr(self, name, self.block[offset:offset + n].view(dt).reshape(fshape))
        self.names = list(self.layout)

    def pad_rows(self, T: int, B: int, rows: int, pages: int) -> None:
        """Make rows [B, rows) harmless padding (for a CUDA-graph batch bucket): one token each,
        reading and writing only the scratch page 0, never sampled."""
        n = rows - B
        self.page_table[:rows, pages:] = 0
        if n <= 0:
            return
        self.page_table[B:rows] = 0
        self.tokens[T:T + n] = 0
        self.from_table[T:T + n] = False
        self.positions[T:T + n] = 0
        self.slot_mapping[T:T + n] = 0
        self.context_lens[B:rows] = 1
        self.query_start[B + 1:rows + 1] = np.arange(T + 1, T + n + 1)
        self.logits_index[B:rows] = np.arange(T, T + n)
        self.temperature[B:rows] = 0.0
        self.min_p[B:rows] = 0.0
        self.presence[B:rows] = 0.0
        self.frequency[B:rows] = 0.0


def _role(name: str) -> str:
    return "apart" if name in UPLOADED_APART else "back" if name in COPIED_BACK else "staged"


@functools.lru_cache(maxsize=64)
def _stage_extent(shape: SlotShape) -> tuple[int, int, int]:
    """(where the last staged field starts, its bytes per row or 0 when it is not a
    per-row table, where the staged fields end): ``stage_bytes`` on the hot path."""
    lay = layout(shape)
    last = [name for name in lay if _role(name) == "staged"][-1]
    offset, n, _, fshape = lay[last]
    per_row = n // shape.max_rows if len(fshape) == 2 and fshape[0] == shape.max_rows else 0
    return offset, per_row, offset + n


@functools.lru_cache(maxsize=64)
def layout(shape: SlotShape) -> dict[str, tuple[int, int, np.dtype, tuple[int, ...]]]:
    """name -> (byte offset, byte size, dtype, shape) inside a slot's staging block (and
    its device mirror): staged fields first (per-row tables last among them), then the
    fields uploaded apart, then the copy-back landing zones. Cached: do not mutate it."""
    order = {"staged": 0, "apart": 2, "back": 3}

    def rank(field) -> int:
        name, _, fshape = field
        per_row_table = len(fshape) == 2 and fshape[0] == shape.max_rows
        return order[_role(name)] + (_role(name) == "staged" and per_row_table)

    out, offset = {}, 0
    for name, dt, fshape in sorted(shape.fields(), key=rank):   # stable: declaration order within a rank
        offset = _align(offset)
        n = dt.itemsize * int(np.prod(fshape))
        out[name] = (offset, n, dt, fshape)
        offset += n
    return out
