"""KV pages on the host: which pages each sequence owns (plain Python, no torch).

The scheduler hands pages out and takes them back; the device's KV pool
(``model/kv_pool.py``) only sees page numbers in the staged page tables. Page 0 is
a scratch page that is never handed out: padding rows of a batch read and write it,
so padding can never touch a live sequence's cache.
"""
from __future__ import annotations

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
