"""A step's ops on the other streams (our copy stream; an imported trace's NCCL and side
streams), found by step without a Python object per op.

``attribution`` asks, per gap, which of the next op's step's copies ended where: per bubble
by record (``get``), and for every gap of a long trace at once when it measures the device's
launch latency (``any_end_in``). Held as the positions of those ops sorted by step, a record
is built only for an op that answers.
"""
from __future__ import annotations

import numpy as np

from photon_trace.telemetry.analysis.gaps import stream_mask
from photon_trace.telemetry.trace.columns import column
from photon_trace.telemetry.trace.distinct import distinct
from photon_trace.telemetry.trace.records import DeviceSpan, Trace

_FAR = 1 << 62


class StepOps:
    """``trace``'s ops on every stream but ``primary``, by step; each step's in the trace's order."""

    __slots__ = ("_spans", "_pos", "_steps", "_t1", "_enqueued")

    def __init__(self, trace: Trace, primary: str):
        self._spans = trace.device_spans
        mine = np.flatnonzero(~stream_mask(self._spans, primary))
        steps = column(self._spans, "step")[mine] if len(mine) else np.empty(0, np.int64)
        by_step = np.argsort(steps, kind="stable")
        self._pos, self._steps = mine[by_step], steps[by_step]
        self._t1 = column(self._spans, "t1")[self._pos] if len(mine) else np.empty(0, np.int64)
        self._enqueued = column(self._spans, "enqueued")[self._pos] if len(mine) else np.empty(0, np.int64)

    def _block(self, step: int) -> slice:
        return slice(int(np.searchsorted(self._steps, step)), int(np.searchsorted(self._steps, step, side="right")))

    def get(self, step: int, default: tuple = ()) -> list[DeviceSpan] | tuple:
        """The step's ops (``default`` without any)."""
        block = self._block(step)
        return [self._spans[i] for i in self._pos[block].tolist()] or default

    def ending_in(self, step: int, lo: int, hi: int) -> list[DeviceSpan]:
        """The step's ops that end in (lo, hi], in the trace's order."""
        block = self._block(step)
        t1 = self._t1[block]
        return [self._spans[i] for i in self._pos[block][(t1 > lo) & (t1 <= hi)].tolist()]

    def latest_ending(self, step: int, lo: int, hi: int) -> DeviceSpan | None:
        """Of the step's ops that end in (lo, hi], the one that ends last (the first in the trace's
        order among equals); None without any."""
        block = self._block(step)
        t1 = self._t1[block]
        inside = np.flatnonzero((t1 > lo) & (t1 <= hi))
        if not len(inside):
            return None
        return self._spans[int(self._pos[block][inside[np.argmax(t1[inside])]])]

    def ends_in(self, step: int, lo: int, hi: int) -> bool:
        """Whether an op of the step ends in (lo, hi]."""
        t1 = self._t1[self._block(step)]
        return bool(((t1 > lo) & (t1 <= hi)).any())

    def any_end_in(self, step: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per k: whether an op of step ``step[k]`` ends in (lo[k], hi[k]]."""
        out = np.zeros(len(step), dtype=bool)
        if not len(self._t1) or not len(step):
            return out
        # one sorted key per op: its step's rank, then its end, so that one searchsorted
        # answers every step's question (ends are offset into disjoint bands per step)
        steps = distinct(self._steps)
        rank = np.searchsorted(steps, self._steps)
        base = int(self._t1.min())
        band = int(self._t1.max()) - base + 2
        if band * len(steps) >= _FAR:
            for k in range(len(step)):     # too wide to band in int64: one step at a time
                t1 = self._t1[np.searchsorted(self._steps, step[k]):np.searchsorted(self._steps, step[k], side="right")]
                out[k] = bool(((t1 > lo[k]) & (t1 <= hi[k])).any())
            return out
        key = np.sort(rank * band + (self._t1 - base))
        q = np.searchsorted(steps, step)
        present = (q < len(steps)) & (steps[np.minimum(q, len(steps) - 1)] == step)
        q, lo, hi = q[present], np.asarray(lo)[present], np.asarray(hi)[present]
        clip = lambda t: np.clip(t - base, -1, band - 2) + q * band   # noqa: E731
        out[present] = np.searchsorted(key, clip(hi), side="right") > np.searchsorted(key, clip(lo), side="right")
        return out

    def tail_ends(self, steps: tuple[np.ndarray, np.ndarray], g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
        """Per gap k: the latest end in (g0[k], g1[k]] of an op of step ``steps[0][k]`` or
        ``steps[1][k]`` enqueued by g0[k] (``Attribution.tail``'s work); g0[k] without one. Each
        step's few ops are paired with the gaps that ask for it, as arrays."""
        out = np.asarray(g0, dtype=np.int64).copy()
        for step in steps:
            lo = np.searchsorted(self._steps, step)
            n = np.searchsorted(self._steps, step, side="right") - lo
            gap = np.repeat(np.arange(len(step)), n)        # one row per (gap, op of its step)
            op = np.repeat(lo - np.concatenate([[0], np.cumsum(n)[:-1]]), n) + np.arange(int(n.sum()))
            t1 = self._t1[op]
            fits = (self._enqueued[op] <= g0[gap]) & (g0[gap] < t1) & (t1 <= g1[gap])
            np.maximum.at(out, gap[fits], t1[fits])
        return out
