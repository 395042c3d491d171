"""The distinct values of an array, and membership in one, by sorting.

What ``np.unique`` and ``np.isin`` answer, without them: numpy 2.4's ``np.unique`` (which
``np.isin`` calls for values spread too wide for its lookup table, such as timestamps) asks
whether its input is a masked array, which imports ``numpy.ma`` the first time: 12 ms, a
quarter of ``photon-trace check`` of a 28-event profile, and its hash table is ~100x slower
than a sort on a million int64 here. A stable sort and a mask are all they need.
"""
from __future__ import annotations

import numpy as np


def first_of_each(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(values, first, inverse)`` as ``np.unique(a, return_index=True, return_inverse=True)``
    gives them for a 1-D ``a``: the distinct values sorted, where each first occurs, and each
    element's position among the values."""
    a = np.asarray(a)
    order = np.argsort(a, kind="stable")
    s = a[order]
    new = np.empty(len(s), dtype=bool)
    new[:1] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    inverse = np.empty(len(a), dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return s[new], order[new], inverse


def distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, sorted (``np.unique(a)`` of a 1-D array)."""
    s = np.sort(np.asarray(a))
    return s[np.append(True, s[1:] != s[:-1])] if len(s) else s


def member(a: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Whether each element of ``a`` is among ``of`` (``np.isin(a, of)``)."""
    a, s = np.asarray(a), np.sort(np.asarray(of))
    if not len(s):
        return np.zeros(len(a), dtype=bool)
    at = np.searchsorted(s, a)
    return s[np.minimum(at, len(s) - 1)] == a
