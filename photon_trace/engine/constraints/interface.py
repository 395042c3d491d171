"""The per-sequence constraint interface. The scheduler knows nothing else about constraints.

A constraint says which tokens may come next (a bitmask in xgrammar's layout:
int32 words, bit ``i`` of word ``w`` allows token ``32 * w + i``) and is advanced
with each committed token. Masks are built on the host after commit(t), for
step t+1 ("forward now, sample later").
"""
from __future__ import annotations

from typing import Any

import numpy as np


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


class Constraint:
    """Base class; subclasses implement the three methods below."""

    def fill_mask(self, out: np.ndarray) -> None:
        """Write the allowed set for the next token into ``out`` ((words,) int32 view, already zeroed)."""
        raise NotImplementedError

    def advance(self, token: int) -> bool:
        """Accept a committed token; True when the constraint has reached its accepting end.

        The engine finalizes the sequence when this returns True.
        """
        raise NotImplementedError

    def result(self) -> Any:
        """The structured result so far (points, boxes, parsed JSON, or the text)."""
        return None
