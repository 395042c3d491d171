"""The device side of a step: the named operations both backends execute.

On CUDA these run on the host thread and enqueue kernels on a stream; on the
host-process device the worker runs them in stream order. Everything here is
allocated once in ``__init__``; the ops only slice and copy into it.
"""
from __future__ import annotations

import torch

from photon_trace.engine.model.batch import ForwardBatch
from photon_trace.engine.device.base import NUM_SLOTS, LaunchShape
from photon_trace.engine.device.masking import apply_bitmask_
from photon_trace.engine.device.sampling import SamplingMode, logprobs, penalize, sample
from photon_trace.engine.device.staging import COPIED_BACK, SlotShape, layout

_TORCH_DTYPES = {"int64": torch.int64, "int32": torch.int32, "float32": torch.float32, "bool": torch.bool}


def torch_dtype(dt) -> torch.dtype:
    """The torch dtype of a staging field's numpy dtype."""
    return _TORCH_DTYPES[dt.name]


class SlotBuffers:
    """Device-side working set of one slot: inputs, logits, sampled tokens and their
    log-probabilities, mask.

    The inputs and the mask are views of ``mirror``, one device block with the
    host staging block's layout, so a launch stages every input in one copy.
    """

    def __init__(self, shape: SlotShape, vocab_size: int, device: torch.device) -> None:
        self.mirror = torch.zeros(shape.nbytes(), dtype=torch.uint8, device=device)
        for name, (offset, n, dt, fshape) in layout(shape).items():
            if name not in COPIED_BACK:   # host-only landing zones
                setattr(self, name, self.mirror[offset:offset + n].view(torch_dtype(dt)).view(fshape))
        R = shape.max_rows
        self.logits = torch.zeros(R, vocab_size, dtype=torch.float32, device=device)
        self.sampled = torch.zeros(R, dtype=torch.int64, device=device)
        self.logprob = torch.zeros(R, dtype=torch.float32, device=device)
        self.top_ids = torch.zeros(R, shape.top_logprobs, dtype=torch.int32, device=device)
        self.top_logprobs = torch.zeros(R, shape.top_logprobs, dtype=torch.float32, device=device)


class DeviceProgram:
    """Model, KV pool, token table and the slots' device buffers, plus the ops on them."""

    def __init__(self, model, kv, shape: SlotShape, num_slots: int, table_rows: int,
                 device: torch.device) -> None:
        self.model, self.kv, self.shape = model, kv, shape
        self.vocab_size = model.config.vocab_size
        # Row ``table_rows`` is scratch: rows that must not publish a token (a
        # non-final prefill chunk, padding) write there.
        self.table = torch.zeros(table_rows + 1, dtype=torch.int64, device=device)
        # How often each token-table row's sequence has generated each token: the presence and
        # frequency penalties read it. Kept on the device, updated by the sampling op itself, so
        # a penalised request needs no host round trip and draws the same tokens at either depth.
        self.counts = torch.zeros(table_rows + 1, self.vocab_size, dtype=torch.float32, device=device)
        self.slots = [SlotBuffers(shape, self.vocab_size, device) for _ in range(num_slots)]

    # -- compute stream ----------------------------------------------------------------
    def stage(self, slot: int, host_block: torch.Tensor, rows: int) -> None:
        """Host staging -> device inputs of a ``rows``-row launch: one contiguous copy of
        the block's staged bytes into the mirror (non-blocking from pinned memory on CUDA)."""
        n = self.shape.stage_bytes(rows)
        self.slots[slot].mirror[:n].copy_(host_block[:n], non_blocking=True)

    def forward_batch(self, slot: int, shape: LaunchShape) -> ForwardBatch:
        T, B, P = shape.num_tokens, shape.num_rows, shape.max_pages
        d = self.slots[slot]
        # Decode rows read their input from the token table: the token sampled
        # last step never had to visit the host.
        tokens = torch.where(d.from_table[:T], self.table[d.token_row[:T]], d.tokens[:T])
        return ForwardBatch(
            token_ids=tokens, positions=d.positions[:T], slot_mapping=d.slot_mapping[:T],
            page_table=d.page_table[:B, :P], context_lens=d.context_lens[:B],
            query_start=d.query_start[:B + 1], logits_index=d.logits_index[:B],
            max_query_len=shape.max_query_len, segments=shape.segments)

    def forward(self, slot: int, shape: LaunchShape) -> None:
        d = self.slots[slot]
        self.model.forward(self.forward_batch(slot, shape), self.kv, out_logits=d.logits[:shape.num_rows])

    def sample(self, slot: int, lo: int, hi: int, *, masked: bool, mode: SamplingMode) -> None:
        """Sample rows [lo, hi) and publish their tokens into the token table; with
        ``mode.logprobs``, also their log-probabilities for the copy-back."""
        d = self.slots[slot]
        logits = d.logits[lo:hi]
        rows = d.row_ids[lo:hi]
        if masked:
            apply_bitmask_(logits, d.mask[lo:hi])   # in place: the slot's logits of these rows
        scores = logits
        if mode.penalties:
            # a sequence's first draw starts from zero counts (its row may have served another)
            counts = self.counts.index_select(0, rows) * ~d.first_sample[lo:hi, None]   # (b, V)
            scores = penalize(logits, counts, d.presence[lo:hi], d.frequency[lo:hi])
        tok = sample(scores, d.temperature[lo:hi], d.top_k[lo:hi], d.top_p[lo:hi],
                     d.seed[lo:hi], d.sample_pos[lo:hi], mode, min_p=d.min_p[lo:hi] if mode.min_p else None)
        if mode.logprobs:
            # the model's distribution (after a constraint's mask, before penalties and temperature)
            chosen, ids, values = logprobs(logits, tok, mode.top_logprobs)
            d.logprob[lo:hi].copy_(chosen)
            if ids is not None:
                d.top_ids[lo:hi, :mode.top_logprobs].copy_(ids)
                d.top_logprobs[lo:hi, :mode.top_logprobs].copy_(values)
        if mode.penalties:
            counts.scatter_add_(1, tok[:, None], torch.ones_like(counts[:, :1]))
            self.counts.index_copy_(0, rows, counts)   # rows are distinct but the scratch row
        d.sampled[lo:hi].copy_(tok)
        self.table.index_copy_(0, rows, tok)

    def read_table(self, row: int) -> torch.Tensor:
        return self.table[row:row + 1]

    # -- copy stream -------------------------------------------------------------------
    def upload_mask(self, slot: int, host_mask: torch.Tensor, lo: int, hi: int) -> None:
        self.slots[slot].mask[lo:hi].copy_(host_mask[lo:hi], non_blocking=True)

    def copy_back(self, slot: int, host: dict[str, torch.Tensor], B: int, logprobs: bool) -> None:
        """Sampled tokens (and, when this step computed them, their log-probabilities) to the
        slot's host landing zones."""
        d = self.slots[slot]
        host["out_tokens"][:B].copy_(d.sampled[:B], non_blocking=True)
        if logprobs:
            host["out_logprob"][:B].copy_(d.logprob[:B], non_blocking=True)
            host["out_top_ids"][:B].copy_(d.top_ids[:B], non_blocking=True)
            host["out_top_logprobs"][:B].copy_(d.top_logprobs[:B], non_blocking=True)


def build_program(spec, device: torch.device) -> DeviceProgram:
    """Load the model and allocate everything the device side keeps (both backends)."""
    from photon_trace.engine.model.kv_pool import KVPool
    from photon_trace.engine.model.loader import load_model

    loaded = load_model(spec.model, dtype=spec.dtype, device=device, seed=spec.seed)
    kv = KVPool(loaded.config, spec.num_pages, spec.page_size, dtype=loaded.model.dtype, device=device)
    return DeviceProgram(loaded.model, kv, spec.shape, NUM_SLOTS, spec.table_rows, device)
