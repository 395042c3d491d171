"""How sure a difference between two runs is: an interval from the runs' own per-step variability.

``compare_stat(a, b, stat)`` gives B − A and B / A of a statistic of each run's per-step values
(the median period, the mean idle per step, idle over period), each with a 95% percentile
bootstrap interval: each run's steps are resampled many times, the statistic is taken of each
resample, and the interval is the middle 95% of the differences (of the ratios).

The resampling moves *blocks* of consecutive steps (a moving-block bootstrap, ``BLOCK`` steps),
not single steps: on a shared machine the load drifts over a run, so neighbouring steps are
alike, and resampling them one by one would make the interval narrower than the run's
variability is. The generator is seeded: the same two runs give the same interval, so a CI
verdict does not change on a rerun of the check.

What no interval from inside two runs can see is the machine changing *between* them; that is
``comparison.machine_change``'s job (the device's own time per op, compared the same way).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SEED = 0x28D           # fixed: the interval of two given runs is a property of the runs, not of the call
RESAMPLES = 1000       # the 2.5% and 97.5% points of 1000 resamples move by a few % of the interval's width
LEVEL = 0.95
BLOCK = 8              # steps per resampled block: longer than the load's short bursts on a 2-core box
_CELLS = 4_000_000     # values per resampling chunk (32 MB of float64): a long trace resampled in pieces

Stat = Callable[[np.ndarray], np.ndarray]
"""Takes resamples (R, n) — or (R, n, k) for k columns per step — and returns one value per resample (R,)."""


def median(x: np.ndarray) -> np.ndarray:
    return np.median(x, axis=1)


def mean(x: np.ndarray) -> np.ndarray:
    return x.mean(axis=1)


def share(x: np.ndarray) -> np.ndarray:
    """Column 0's sum over column 1's (idle over period: the idle fraction of the resampled steps)."""
    total = x[..., 1].sum(axis=1)
    return np.divide(x[..., 0].sum(axis=1), total, out=np.zeros_like(total, dtype=float), where=total > 0)


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate and its interval (``low`` <= ``point`` <= ``high`` up to resampling)."""
    point: float
    low: float
    high: float

    def excludes(self, value: float) -> bool:
        """Whether ``value`` (no change: 0 for a difference, 1 for a ratio) lies outside the interval."""
        return value < self.low or value > self.high


def resampled(values: np.ndarray, stat: Stat, rng: np.random.Generator, resamples: int = RESAMPLES,
              block: int = BLOCK) -> np.ndarray:
    """``stat`` of ``resamples`` moving-block resamples of ``values`` (n,) or (n, k); (resamples,)."""
    n = len(values)
    b = max(1, min(block, n))
    blocks = -(-n // b)
    out = np.empty(resamples)
    chunk = max(1, _CELLS // max(1, n * (values.shape[1] if values.ndim > 1 else 1)))
    offsets = np.arange(b)
    for i in range(0, resamples, chunk):
        m = min(chunk, resamples - i)
        starts = rng.integers(0, n - b + 1, size=(m, blocks))
        idx = (starts[:, :, None] + offsets).reshape(m, -1)[:, :n]   # (m, n): whole blocks, cut to n steps
        out[i:i + m] = stat(values[idx])
    return out


def compare_stat(a: np.ndarray, b: np.ndarray, stat: Stat, *, seed: int = SEED, resamples: int = RESAMPLES,
                 level: float = LEVEL) -> tuple[Interval, Interval]:
    """(B − A, B / A) of ``stat`` over runs A and B's per-step values, each with its interval.

    A run of a single step has no variability to resample: its interval is its point. A zero
    statistic in A makes the ratio infinite (its interval too)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(a) or not len(b):
        raise ValueError("each run needs at least one step to compare")
    rng = np.random.default_rng(seed)
    pa, pb = float(stat(a[None])[0]), float(stat(b[None])[0])
    ra, rb = resampled(a, stat, rng, resamples), resampled(b, stat, rng, resamples)
    tail = 100 * (1 - level) / 2
    d = rb - ra
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(ra != 0, rb / np.where(ra != 0, ra, 1), np.inf)
    lo, hi = np.percentile(d, [tail, 100 - tail])
    rlo, rhi = np.percentile(r, [tail, 100 - tail]) if np.isfinite(r).all() else (np.inf, np.inf)
    ratio = pb / pa if pa else float("inf")
    return (Interval(pb - pa, float(min(lo, pb - pa)), float(max(hi, pb - pa))),
            Interval(ratio, float(min(rlo, ratio)), float(max(rhi, ratio))))
