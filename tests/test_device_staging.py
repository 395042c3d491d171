"""A slot's staging layout: every staged input reaches the device in one contiguous copy.

The host block and the device mirror share one layout (``staging.layout``):
staged fields first, per-row tables last among them, then the mask (uploaded at
finalize) and the copy-back landing zone. A launch of B rows copies the bytes
``[0, stage_bytes(B))``: all flat fields and the first B rows of the page table.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from photon_trace.engine.device.program import SlotBuffers
from photon_trace.engine.device.staging import COPIED_BACK, UPLOADED_APART, SlotShape, SlotStaging, layout

SHAPE = SlotShape(max_rows=8, max_tokens=32, max_pages=6, mask_words=5)


@dataclass(frozen=True, slots=True)
class WithCounts(SlotShape):
    """A slot shape with two more inputs, as a sampling feature would add (a new device ->
    host output would also be named in ``COPIED_BACK``)."""

    def fields(self):
        R, T = self.max_rows, self.max_tokens
        return [("penalty_counts", np.dtype(np.int32), (R, 3)), *SlotShape.fields(self),
                ("token_weight", np.dtype(np.float32), (T,))]


WITH_COUNTS = WithCounts(max_rows=8, max_tokens=32, max_pages=6, mask_words=5)


def _roles(shape):
    lay = layout(shape)
    names = list(lay)
    staged = [n for n in names if n not in UPLOADED_APART | COPIED_BACK]
    return lay, names, staged


@pytest.mark.parametrize("shape", [SHAPE, WITH_COUNTS], ids=["slot", "with-new-fields"])
def test_staged_fields_come_first_and_the_page_table_last_among_them(shape):
    lay, names, staged = _roles(shape)
    assert names[:len(staged)] == staged, "every staged field before the mask and the landing zones"
    assert staged[-1] == "page_table"
    assert names.index("mask") < names.index("out_tokens")
    offsets = [lay[n][0] for n in names]
    assert offsets == sorted(offsets) and all(o % 64 == 0 for o in offsets)
    for a, b in zip(names, names[1:]):
        assert lay[a][0] + lay[a][1] <= lay[b][0], f"{a} overlaps {b}"
    assert shape.nbytes() >= lay[names[-1]][0] + lay[names[-1]][1]


def test_a_launch_copies_all_flat_fields_and_its_rows_of_the_page_table():
    lay = layout(SHAPE)
    start, n = lay["page_table"][:2]
    row = n // SHAPE.max_rows
    for rows in (1, 3, 8):
        assert SHAPE.stage_bytes(rows) == start + rows * row
    assert SHAPE.stage_bytes(3) <= lay["mask"][0]


@pytest.mark.parametrize("shape", [SHAPE, WITH_COUNTS], ids=["slot", "with-new-fields"])
def test_one_copy_stages_every_input_into_the_device_mirror(shape):
    """Host staging written field by field, one block copy, and the device views agree:
    fields a teammate adds to ``fields()`` travel too, with no change to the copy."""
    block = bytearray(shape.nbytes())
    st = SlotStaging(shape, block)
    rng = np.random.default_rng(0)
    for name in st.names:
        view = getattr(st, name)
        view[...] = rng.integers(0, 100, size=view.shape).astype(view.dtype)
    dev = SlotBuffers(shape, vocab_size=shape.mask_words * 32, device=torch.device("cpu"))
    rows = 3
    n = shape.stage_bytes(rows)
    dev.mirror[:n].copy_(torch.frombuffer(block, dtype=torch.uint8)[:n])
    _, _, staged = _roles(shape)
    for name in staged:
        host, device = getattr(st, name), getattr(dev, name).numpy()
        if name == "page_table":
            host, device = host[:rows], device[:rows]
        np.testing.assert_array_equal(device, host, err_msg=name)
    assert not getattr(dev, "mask").any(), "the mask travels by its own upload"
    assert not any(hasattr(dev, name) for name in COPIED_BACK), "landing zones stay on the host"
