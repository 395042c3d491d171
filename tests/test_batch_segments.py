"""Mixed batches: runs of single-token rows and longer rows are attended apart."""
from __future__ import annotations

import torch

from photon_trace.engine.model.segments import Segment, row_segments
from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.model.presets import build_preset
from photon_trace.engine.model.batch import make_forward_batch


def test_runs_of_short_and_long_rows_with_their_tokens_and_pages():
    assert row_segments([1, 1, 5, 1, 3, 3], [2, 1, 4, 1, 3, 5]) == (
        Segment(0, 2, 0, 2, 1, 2), Segment(2, 3, 2, 7, 5, 4),
        Segment(3, 4, 7, 8, 1, 1), Segment(4, 6, 8, 14, 3, 5))
    assert row_segments([1, 1, 1], [1, 2, 3]) == ()      # one run: the plain path
    assert row_segments([4, 7], [1, 1]) == ()


def test_a_segmented_forward_equals_the_padded_one():
    model = build_preset("tiny", seed=1)
    rows = [([5], 20, [1, 2]), ([7, 8, 9, 10, 11, 12], 0, [3]), ([3], 9, [4]), ([1, 2, 3], 30, [5, 6, 7])]
    batch = make_forward_batch(rows, 16)
    assert len(batch.segments) == 4
    with torch.inference_mode():
        kv = KVPool(model.config, 8, 16)
        kv.k.normal_(), kv.v.normal_()         # earlier context the rows attend to
        k0, v0 = kv.k.clone(), kv.v.clone()
        split = model(batch, kv, all_logits=True)
        kv.k.copy_(k0), kv.v.copy_(v0)
        batch.segments = ()
        padded = model(batch, kv, all_logits=True)
    torch.testing.assert_close(split, padded, rtol=1e-4, atol=1e-4)
