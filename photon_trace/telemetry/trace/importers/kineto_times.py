"""``plausible.implausible`` over columns: the rule every trace's times keep, for ten million
events without a Python int per time.

The usual case (every time plausible) is three array reductions. Otherwise the median start
is found (``np.partition``; times beyond int64 sit below or above every other), candidates are
picked with a float margin far wider than float64's rounding, and each candidate is judged by
``plausible.py``'s own per-record rule, so the messages are that module's.
"""
from __future__ import annotations

import numpy as np

from photon_trace.telemetry.trace.plausible import INT64_END, MAX_SPREAD_NS
from photon_trace.telemetry.trace.plausible import _problem as problem_of


def implausible_rows(t0: np.ndarray, t1: np.ndarray, wide: dict[int, tuple[int, int]],
                     first_only: bool = True) -> list[tuple[int, str]]:
    """The rows whose ``(t0, t1)`` break the rule, with what is wrong (only the first, when
    ``first_only``). ``wide``: row -> the true (t0, t1) of rows whose times do not fit int64
    (their array values are clipped)."""
    n = len(t0)
    if not n:
        return []
    if not wide:
        lo, hi = int(min(t0.min(), t1.min())), int(max(t0.max(), t1.max()))
        if lo >= 0 and hi < INT64_END and hi - lo <= MAX_SPREAD_NS and not (t1 < t0).any():
            return []
    median = _median_start(t0, wide)
    margin = MAX_SPREAD_NS * 0.999
    m = float(median)
    suspect = (t0 < 0) | (t1 < t0) | (np.abs(t0.astype(np.float64) - m) > margin) \
        | (np.abs(t1.astype(np.float64) - m) > margin)
    rows = sorted(set(np.flatnonzero(suspect).tolist()) | set(wide))
    out = []
    for r in rows:
        a, b = wide.get(r, (int(t0[r]), int(t1[r])))
        problem = problem_of(a, b, median)
        if problem is not None:
            out.append((r, problem))
            if first_only:
                break
    return out


def _median_start(t0: np.ndarray, wide: dict[int, tuple[int, int]]) -> int:
    """``sorted(starts)[n // 2]`` with the true starts of the ``wide`` rows."""
    k = len(t0) // 2
    starts = [a for a, _ in wide.values()]
    low = sorted(a for a in starts if a < -(2**63))
    high = sorted(a for a in starts if a >= 2**63)
    if wide:
        keep = np.ones(len(t0), dtype=bool)
        keep[list(wide)] = False
        rest = t0[keep]
        # a wide row whose start fits (its end did not) is an ordinary start
        rest = np.concatenate([rest, np.array([a for a in starts if -(2**63) <= a < 2**63], dtype=np.int64)])
    else:
        rest = t0
    if k < len(low):
        return low[k]
    k -= len(low)
    if k < len(rest):
        return int(np.partition(rest, k)[k])
    return high[k - len(rest)]
