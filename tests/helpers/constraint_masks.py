"""What a constraint's token bitmask allows, read back as token ids: for the constraint tests."""
from __future__ import annotations

import numpy as np

from photon_trace.engine.constraints.interface import bitmask_words


def mask_ids(row: np.ndarray) -> set[int]:
    """The token ids a packed (words,) int32 bitmask row allows: bit i of word w is token 32 * w + i."""
    return set(np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist())


def allowed_ids(constraint, vocab: int) -> set[int]:
    """The token ids ``constraint`` allows next, filled into a fresh zeroed row for ``vocab`` tokens."""
    row = np.zeros(bitmask_words(vocab), np.int32)
    constraint.fill_mask(row)
    return mask_ids(row)
