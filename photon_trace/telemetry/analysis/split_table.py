"""What the diagnosis reads of each gap's split, kept as flat arrays instead of the splits.

``diagnosis.predict_each`` and ``charging.charges`` read, of every bubble-sized gap, a handful
of numbers (its share inside the window, its length less no work, its host-late part, its tail,
its launch latency, whether the host had regained its lead) and two small maps: the host time
per row since the last gap (``GapSplit.chain``) and the time per row of its device-made parts.
Holding the ``(Gap, GapSplit)`` pairs for that cost ~1.5 KB a gap (two op records, the parts,
the chain), gigabytes for the four million gaps of our own ten-million-span trace. Here each
gap is a few machine words in ``array.array`` columns and each row's chain and device time
sparse (gap index, ns), so ``analyze`` reads the splits once, as they are made, and keeps this.

The prediction is ``diagnosis``'s (its docstring says what a fix removes) computed per fix over
the gaps in time order, with the same float sums in the same order as over the pairs: the
answers are the same to the bit. A fix is walked only over the gaps where one of its rows
appears or its shift is still being absorbed, not over every gap for every row.
"""
from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np

from photon_trace.telemetry.analysis.attribution import OUTSIDE_PHASES, GapSplit
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.removal_walk import walk

Key = tuple[Cause, str]
NONE = -(1 << 63)     # a gap that measured no launch latency (``GapSplit.launch_ns`` None)


def _sparse() -> tuple[array, array]:
    return array("q"), array("q")     # (gap index, ns)


class SplitTable:
    """The splits of one analysis, as ``diagnosis`` and ``charging`` read them; ``add`` them in
    time order (or ``of`` a list of pairs)."""

    __slots__ = ("inside", "full", "late", "regained", "tail", "launch", "chain", "device", "shared", "_queued")

    def __init__(self) -> None:
        self.inside = array("d")    # the share of the gap inside the window
        self.full = array("q")      # the gap less its no work (no fix's to remove)
        self.late = array("q")      # GapSplit.host_late_ns
        self.regained = array("b")
        self.tail = array("q")      # GapSplit.tail_ns
        self.launch = array("q")    # GapSplit.launch_ns, NONE for None
        self.chain: dict[Key, tuple[array, array]] = defaultdict(_sparse)    # host rows' chains
        self.device: dict[Key, tuple[array, array]] = defaultdict(_sparse)   # device rows' part time
        self.shared: dict[Key, int] = defaultdict(int)   # charging.shared_idle
        self._queued: dict[Any, bool] = {}

    @classmethod
    def of(cls, splits: Iterable[tuple[Any, GapSplit]]) -> SplitTable:
        table = cls()
        for gap, s in splits:
            table.add(gap, s)
        return table

    def __len__(self) -> int:
        return len(self.full)

    def _is_queued(self, cause: Any) -> bool:
        q = self._queued.get(cause)
        if q is None:
            q = self._queued[cause] = Cause(cause).queued
        return q

    def add(self, gap: Any, s: GapSplit) -> None:
        """One gap (a ``bubbles.Gap``: ``t0``, ``t1`` its part in the window) and its split."""
        i = len(self.full)
        self.inside.append((gap.t1 - gap.t0) / gap.full_ns)
        self.full.append(gap.full_ns - s.no_work_ns)
        self.late.append(s.host_late_ns)
        self.regained.append(s.regained)
        self.tail.append(s.tail_ns)
        self.launch.append(NONE if s.launch_ns is None else s.launch_ns)
        queued = self._queued     # ``_is_queued``'s cache read inline; the call only for a new cause
        chains = self.chain
        for key, ns in s.chain.items():
            q = queued.get(key[0])
            if not (self._is_queued(key[0]) if q is None else q):  # only host rows shift the host
                idx, val = chains[key]
                idx.append(i)
                val.append(ns)
        device = self.device
        for t0, t1, cause, detail in s.parts:
            q = queued.get(cause)
            if self._is_queued(cause) if q is None else q:
                idx, val = device[(cause, detail)]
                if idx and idx[-1] == i:
                    val[-1] += t1 - t0
                else:
                    idx.append(i)
                    val.append(t1 - t0)
        for p in s.shared:      # as ``charging._shared_parts``
            if p.detail.startswith(OUTSIDE_PHASES):
                continue
            a, b = max(p.t0, gap.t0), min(p.t1, gap.t1)
            if a < b:
                self.shared[(p.cause, p.detail)] += b - a

    # -- the prediction ----------------------------------------------------------------------
    def _gathered(self, source: dict[Key, tuple[array, array]], rows: Iterable[Key]) -> dict[int, int]:
        out: dict[int, int] = {}
        for key in rows:
            if key in source:
                idx, val = source[key]
                for i, ns in zip(idx, val):
                    out[i] = out.get(i, 0) + ns
        return out

    def _dense(self, source: dict[Key, tuple[array, array]], rows: Iterable[Key]) -> np.ndarray:
        """Per gap, the ns of ``rows`` in ``source`` summed (``_gathered`` as one array)."""
        out = np.zeros(len(self), dtype=np.int64)
        for key in rows:
            if key in source and len(source[key][0]):
                idx, val = source[key]
                out[np.frombuffer(idx, dtype=np.int64)] += np.frombuffer(val, dtype=np.int64)    # one entry a gap
        return out

    def removed(self, rows: set[Key], launch_ns: int) -> tuple[float, float, float]:
        """(point, low, high) idle that removing ``rows`` together gives back (``predict_each``):
        ``removal_walk`` over every gap as arrays; the walk gap by gap (``walked``) where a chain or
        host-late time is negative, which the shift's recursion there does not allow for."""
        if not len(self):
            return 0.0, 0.0, 0.0
        device = self._dense(self.device, [r for r in rows if Cause(r[0]).queued])
        chain = self._dense(self.chain, [r for r in rows if not Cause(r[0]).queued])
        late = np.frombuffer(self.late, dtype=np.int64)
        if (chain < 0).any() or (late < 0).any():
            return self.walked(rows, launch_ns)
        q = lambda a: np.frombuffer(a, dtype=np.int64)    # noqa: E731
        return walk(device, chain, late, np.frombuffer(self.regained, dtype=np.int8), np.frombuffer(self.inside),
                    q(self.full), q(self.tail), q(self.launch), NONE, launch_ns)

    def walked(self, rows: set[Key], launch_ns: int) -> tuple[float, float, float]:
        """``removed``, gap by gap: each fix walked over the gaps where one of its rows appears or
        its shift is still being absorbed."""
        host = [r for r in rows if not Cause(r[0]).queued]
        dev = self._gathered(self.device, [r for r in rows if Cause(r[0]).queued])
        chain = self._gathered(self.chain, host)
        p0 = p1 = p2 = 0.0
        inside, full, late, tail, launch, regained = (self.inside, self.full, self.late, self.tail, self.launch,
                                                      self.regained)
        touched = sorted(dev.keys() | chain.keys())
        n, shift, j, m = len(full), 0, 0, len(touched)
        own_at, chain_at = dev.get, chain.get
        i = touched[0] if touched else n
        while i < n:
            own = own_at(i)
            if own is not None:
                own = own * inside[i]
                p0, p1, p2 = p0 + own, p1 + own, p2 + own
            if regained[i]:
                shift = 0
            shift += chain_at(i, 0)
            lt = late[i]
            if lt != 0 and shift != 0:
                cut = min(shift, lt)
                shift -= cut
                beyond_tail = lt - min(lt, tail[i])   # the host's lateness the device could have used
                if cut < beyond_tail:
                    x = cut * inside[i]
                    p0, p1, p2 = p0 + x, p1 + x, p2 + x
                elif beyond_tail != 0:      # cleared: see ``diagnosis``
                    f, t = full[i], tail[i]
                    own_launch = launch[i] if launch[i] != NONE else launch_ns
                    floor = min(f, t + own_launch)
                    w = inside[i]
                    p0 += (f - floor) * w
                    p1 += (f - min(f, max(floor, f - beyond_tail))) * w
                    p2 += (f - min(f, t)) * w
            # the next gap that matters: the next one while a shift is left, else the next touched
            if shift > 0:
                i += 1
            else:
                while j < m and touched[j] <= i:
                    j += 1
                i = touched[j] if j < m else n
        return p0, p1, p2

    def removed_each(self, fixes: dict[Hashable, set[Key]], launch_ns: int) -> dict[Hashable, tuple[float, float, float]]:
        return {k: self.removed(rows, launch_ns) for k, rows in fixes.items()}
