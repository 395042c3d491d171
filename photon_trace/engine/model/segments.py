"""How attention splits a mixed batch: runs of single-token rows apart from runs of longer rows.

Plain Python, no torch: the scheduler computes a step's segments on the host (the
device then slices by these ints, never by a device value).
"""
from __future__ import annotations

from typing import NamedTuple, Sequence


class Segment(NamedTuple):
    """A run of consecutive rows that attention pads to one query length (host-known ints)."""
    row_lo: int
    row_hi: int
    tok_lo: int
    tok_hi: int
    max_query_len: int
    pages: int          # the most pages any of its rows has


def row_segments(lengths: Sequence[int], pages: Sequence[int]) -> tuple[Segment, ...]:
    """Split rows into runs of single-token rows and runs of longer rows; () if one run.

    Attention pads every row to the batch's longest query: a mixed step of 63 decode rows
    and one 193-token prefill chunk padded all 64 rows to 193 queries and cost 4x the sum
    of its parts. Runs keep each row's tokens contiguous, so a segment is a slice by host
    ints: no index tensor, no device read.
    """
    runs: list[Segment] = []
    tok = 0
    for b, n in enumerate(lengths):
        if runs and (runs[-1].max_query_len == 1) == (n == 1):
            r = runs[-1]
            runs[-1] = r._replace(row_hi=b + 1, tok_hi=tok + n, max_query_len=max(r.max_query_len, n),
                                  pages=max(r.pages, pages[b]))
        else:
            runs.append(Segment(b, b + 1, tok, tok + n, n, pages[b]))
        tok += n
    return tuple(runs) if len(runs) > 1 else ()
