"""The paged KV cache: a page allocator (plain Python) and the pool of pages (torch).

The pool is allocated once at start-up; sequences own pages through per-sequence
page tables. Page 0 is a scratch page that is never handed out: padding rows of a
batch read and write it, so padding can never touch a live sequence's cache.
"""
from __future__ import annotations

import torch

from photon_trace.engine.config import ModelConfig

SCRATCH_PAGE = 0


class PageAllocator:
    """Free list over pages 1..num_pages-1. No torch, no device: unit-testable anywhere."""

    __slots__ = ("num_pages", "_free", "_used")

    def __init__(self, num_pages: int) -> None:
        if num_pages < 2:
            raise ValueError(f"a pool needs at least 2 pages (page 0 is scratch), got {num_pages}")
        self.num_pages = num_pages
        # Popped from the end, so low page numbers are handed out first.
        self._free: list[int] = list(range(num_pages - 1, SCRATCH_PAGE, -1))
        self._used: set[int] = set()

    @property
    def capacity(self) -> int:
        """Pages that can ever be handed out (all but the scratch page)."""
        return self.num_pages - 1

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return len(self._used)

    def all_free(self) -> bool:
        return not self._used

    def can_alloc(self, n: int) -> bool:
        return 0 <= n <= len(self._free)

    def alloc(self, n: int) -> list[int] | None:
        """``n`` pages, or None when fewer than ``n`` are free (nothing is taken then)."""
        if n < 0:
            raise ValueError(f"cannot allocate {n} pages")
        if n > len(self._free):
            return None
        pages = [self._free.pop() for _ in range(n)]
        self._used.update(pages)
        return pages

    def free(self, pages: list[int]) -> None:
        """Return pages to the free list; freeing a page that is not in use raises."""
        bad = [p for p in pages if p not in self._used]
        if bad or len(set(pages)) != len(pages):
            raise ValueError(f"double free or foreign pages: {bad or pages}")
        self._used.difference_update(pages)
        self._free.extend(reversed(pages))

    def __repr__(self) -> str:
        return f"PageAllocator(used={self.num_used}, free={self.num_free}, capacity={self.capacity})"


def pages_needed(num_tokens: int, page_size: int) -> int:
    return -(-num_tokens // page_size)


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

    @classmethod
    def from_pages(cls, config: ModelConfig, num_pages: int, page_size: int = 16,
                   dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> KVPool:
        return cls(config, num_pages, page_size, dtype, device)

    @classmethod
    def from_budget(cls, config: ModelConfig, budget_bytes: int, page_size: int = 16,
                    dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> KVPool:
        """As many pages as fit in ``budget_bytes`` (K and V of all layers counted)."""
        per_page = cls.bytes_per_page(config, page_size, dtype)
        num_pages = budget_bytes // per_page
        if num_pages < 2:
            raise ValueError(f"a KV budget of {budget_bytes} bytes holds {num_pages} pages of "
                             f"{per_page} bytes; at least 2 are needed")
        return cls(config, num_pages, page_size, dtype, device)

    @staticmethod
    def bytes_per_page(config: ModelConfig, page_size: int, dtype: torch.dtype) -> int:
        return page_size * config.kv_bytes_per_token(dtype)

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    @property
    def tokens_capacity(self) -> int:
        return (self.num_pages - 1) * self.page_size

    def allocator(self) -> PageAllocator:
        return PageAllocator(self.num_pages)

    def __repr__(self) -> str:
        return (f"KVPool(pages={self.num_pages}, page_size={self.page_size}, dtype={self.dtype}, "
                f"device={self.device}, {self.nbytes / 2**20:.1f} MiB)")
