"""Token bitmasks on the host: the layout constraints fill (xgrammar's); the device applies them
(``device/masking.py``)."""
from __future__ import annotations

import numpy as np


def pack_bitmask(allowed: np.ndarray) -> np.ndarray:
    """(words * 32,) bool -> (words,) int32 in xgrammar's layout, read-only: a host-side constant mask."""
    # Little-endian bits within little-endian words: bit i of word w is token 32 * w + i.
    mask = np.packbits(allowed, bitorder="little").view("<i4").astype(np.int32)
    mask.flags.writeable = False
    return mask
