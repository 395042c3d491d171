"""apply_bitmask_ against a numpy reference, on CPU (and CUDA when there is one)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from photon_trace.engine.constraints.interface import bitmask_words
from photon_trace.engine.device.masking import apply_bitmask_


def reference(logits: np.ndarray, bitmask: np.ndarray, rows: list[int] | None) -> np.ndarray:
    out = logits.copy()
    vocab = logits.shape[1]
    for r in range(logits.shape[0]) if rows is None else rows:
        for t in range(vocab):
            if not (int(bitmask[r, t // 32]) >> (t % 32)) & 1:
                out[r, t] = -np.inf
    return out


def random_case(seed: int, batch: int, vocab: int, extra_rows: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((batch, vocab)).astype(np.float32)
    words = bitmask_words(vocab)
    bitmask = rng.integers(-2**31, 2**31, size=(batch + extra_rows, words), dtype=np.int64).astype(np.int32)
    bitmask[0, 0] = np.int32(-2**31)  # only bit 31 set: the sign bit must read as one allowed token
    return logits, bitmask


@pytest.mark.parametrize("vocab", [32, 100, 2560])
@pytest.mark.parametrize("rows", [None, [0], [3, 1], [0, 1, 2, 3, 4]])
def test_matches_the_numpy_reference(vocab, rows):
    logits, bitmask = random_case(vocab, 5, vocab)
    expected = reference(logits, bitmask, rows)
    t = torch.from_numpy(logits.copy())
    index = None if rows is None else torch.tensor(rows, dtype=torch.int64)
    out = apply_bitmask_(t, torch.from_numpy(bitmask), index)
    assert out is t
    np.testing.assert_array_equal(t.numpy(), expected)


def test_a_taller_bitmask_buffer_is_accepted():
    logits, bitmask = random_case(7, 3, 96, extra_rows=5)
    t = torch.from_numpy(logits.copy())
    apply_bitmask_(t, torch.from_numpy(bitmask))
    np.testing.assert_array_equal(t.numpy(), reference(logits, bitmask, None))


def test_unmasked_rows_are_untouched():
    logits, _ = random_case(3, 4, 64)
    bitmask = np.zeros((4, 2), np.int32)  # everything disallowed in the masked rows
    t = torch.from_numpy(logits.copy())
    apply_bitmask_(t, torch.from_numpy(bitmask), torch.tensor([1, 2]))
    assert torch.isneginf(t[1:3]).all()
    np.testing.assert_array_equal(t[[0, 3]].numpy(), logits[[0, 3]])


def test_shape_errors_are_explained():
    with pytest.raises(ValueError, match="cannot cover a vocabulary"):
        apply_bitmask_(torch.zeros(2, 65), torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match="expected logits"):
        apply_bitmask_(torch.zeros(3, 64), torch.zeros(2, 2, dtype=torch.int32))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_the_reference_without_a_host_sync():
    logits, bitmask = random_case(11, 8, 2560)
    t = torch.from_numpy(logits.copy()).cuda()
    bm = torch.from_numpy(bitmask).cuda()
    rows = torch.tensor([0, 5, 7], device="cuda")
    apply_bitmask_(t, bm, rows)  # warm up: lazy CUDA init may sync
    t = torch.from_numpy(logits.copy()).cuda()
    torch.cuda.set_sync_debug_mode("error")
    try:
        apply_bitmask_(t, bm, rows)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    np.testing.assert_array_equal(t.cpu().numpy(), reference(logits, bitmask, [0, 5, 7]))
