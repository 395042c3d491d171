"""The pool of KV pages on the device (torch).

Allocated once at start-up and never resized; sequences own pages through the page
tables the scheduler stages (``engine/pages.py`` hands page numbers out). Page 0 is
the scratch page padding rows write.
"""
from __future__ import annotations

import torch

from photon_trace.engine.model.config import ModelConfig


class KVPool:
    """K and V tensors shaped (num_layers, num_pages, page_size, num_kv_heads, head_dim).

    Allocated once and never resized; the model writes a token's K/V at flat slot
    ``page * page_size + offset`` of its layer.
    """

    __slots__ = ("k", "v", "page_size", "num_pages", "dtype", "device")

    def __init__(self, config: ModelConfig, num_pages: int, page_size: int = 16,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> None:
        if num_pages < 2:
            raise ValueError(f"a pool needs at least 2 pages (page 0 is scratch), got {num_pages}")
        if page_size < 1:
            raise ValueError(f"page_size must be positive, got {page_size}")
        shape = (config.num_layers, num_pages, page_size, config.num_kv_heads, config.head_dim)
        # Zeroed, so the scratch page holds finite values before any padding row writes it.
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.page_size = page_size
        self.num_pages = num_pages
        self.dtype = dtype
        self.device = self.k.device

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    def __repr__(self) -> str:
        return (f"KVPool(pages={self.num_pages}, page_size={self.page_size}, dtype={self.dtype}, "
                f"device={self.device}, {self.nbytes / 2**20:.1f} MiB)")
