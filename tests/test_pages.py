"""The page allocator and the KV pool: allocation, freeing, exhaustion, the scratch page."""
from __future__ import annotations

import pytest
import torch

from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.pages import SCRATCH_PAGE, PageAllocator, pages_needed
from photon_trace.engine.model.loader import load_model
from helpers.reference_generate import KVPoolExhausted, generate


def test_alloc_hands_out_distinct_pages_and_never_the_scratch_page():
    alloc = PageAllocator(9)
    pages = alloc.alloc(8)
    assert sorted(pages) == list(range(1, 9))
    assert SCRATCH_PAGE not in pages
    assert alloc.num_used == 8 and alloc.num_free == 0 and not alloc.all_free()


def test_exhaustion_returns_none_and_takes_nothing():
    alloc = PageAllocator(5)
    first = alloc.alloc(3)
    assert alloc.alloc(2) is None
    assert alloc.num_free == 1 and alloc.num_used == 3
    assert alloc.alloc(1) is not None
    assert alloc.alloc(1) is None
    alloc.free(first)
    assert alloc.num_free == 3


def test_free_returns_pages_for_reuse():
    alloc = PageAllocator(4)
    pages = alloc.alloc(3)
    alloc.free(pages)
    assert alloc.all_free() and alloc.num_free == 3
    assert sorted(alloc.alloc(3)) == sorted(pages)


def test_double_free_and_foreign_pages_raise():
    alloc = PageAllocator(4)
    pages = alloc.alloc(2)
    alloc.free(pages)
    with pytest.raises(ValueError):
        alloc.free(pages)
    with pytest.raises(ValueError):
        alloc.free([SCRATCH_PAGE])
    p = alloc.alloc(1)
    with pytest.raises(ValueError):
        alloc.free(p + p)  # the same page twice in one call
    assert alloc.num_used == 1


def test_zero_pages_and_bad_sizes():
    alloc = PageAllocator(2)
    assert alloc.alloc(0) == []
    with pytest.raises(ValueError):
        alloc.alloc(-1)
    with pytest.raises(ValueError):
        PageAllocator(1)
    assert pages_needed(0, 16) == 0 and pages_needed(16, 16) == 1 and pages_needed(17, 16) == 2


def test_pool_shape_and_size():
    config = load_model("tiny").config
    pool = KVPool(config, 10, page_size=8)
    assert pool.k.shape == (config.num_layers, 10, 8, config.num_kv_heads, config.head_dim)
    assert pool.v.shape == pool.k.shape and pool.k.dtype == torch.float32
    pool = KVPool(config, 20, page_size=8, dtype=torch.bfloat16)
    assert pool.nbytes == 20 * 8 * config.kv_bytes_per_token(torch.bfloat16)
    with pytest.raises(ValueError):
        KVPool(config, 1, page_size=8)


def test_pool_is_all_free_after_generate():
    loaded = load_model("tiny")
    kv = KVPool(loaded.config, 64, page_size=4)
    alloc = PageAllocator(kv.num_pages)
    result = generate(loaded.model, loaded.tokenizer, ["Hello", "a longer prompt here"], max_new_tokens=12,
                      kv=kv, allocator=alloc)
    assert [len(t) for t in result.token_ids] == [12, 12]
    assert alloc.all_free()


def test_exhausted_pool_is_reported_and_left_all_free():
    loaded = load_model("tiny")
    kv = KVPool(loaded.config, 4, page_size=4)
    alloc = PageAllocator(kv.num_pages)
    with pytest.raises(KVPoolExhausted):
        generate(loaded.model, loaded.tokenizer, ["Hello there", "and more"], max_new_tokens=8,
                 kv=kv, allocator=alloc)
    assert alloc.all_free()
