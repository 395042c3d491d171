"""``SplitTable.removed``'s walk over the gaps as arrays: the host's shift and the three sums.

Removing a fix's rows shifts the host earlier by their chain time; each gap's host-late part
absorbs what it can of the shift, and the rest carries to the next gap until the host regains
its lead (``diagnosis``). Where a sync's charge is carried through every gap (our own trace with
the mask-upload bug) the shift never clears, so the walk in ``SplitTable`` visited every gap for
every fix: ~1.5 s of checking a million-span trace. Here the same walk is a few passes of numpy.

* **The shift** after gap ``i`` is ``max(shift before + chain[i] - late[i], 0)`` (restarting at 0
  where the host regained its lead): a queue's backlog (Lindley's recursion). With ``P`` the
  running sum of ``chain - late`` it is ``P[i] - min(P[k])`` over the gaps since the restart
  (the restart's own ``P`` before it included): a running minimum within each stretch between
  restarts (``_running_min``).
* **The sums** are the loop's float additions in the loop's order: per gap the device time a
  fix removes, then what the host's earlier enqueue gives back. ``np.add.accumulate`` adds
  left to right one at a time, as the loop did, and adding ``0.0`` where the loop added nothing
  changes no sum, so the answers are the loop's to the bit (``tests/test_analysis_split_table.py``
  keeps the loop as the reference).

The gaps are walked in blocks, so a walk over the four million gaps of a ten-million-span trace
holds a few arrays of a block at a time, the shift and sums carried from block to block.
"""
from __future__ import annotations

import numpy as np

BLOCK = 1 << 20
_FEW = 1000


def _running_min(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The least of ``x`` so far within each stretch that begins at one of ``starts`` (ascending,
    ``starts[0] == 0``): one ``minimum.accumulate`` per stretch where they are few (our trace:
    the host regains its lead ~100 times in 194k gaps), else by doubling over all of them at once."""
    if len(starts) <= _FEW:
        ends = np.append(starts[1:], len(x))
        return np.concatenate([np.minimum.accumulate(x[a:b]) for a, b in zip(starts.tolist(), ends.tolist())])
    segment = np.zeros(len(x), dtype=np.int64)
    segment[starts[1:]] = 1
    segment = np.cumsum(segment)
    m = x.copy()
    d = 1
    while d < len(m):
        m[d:] = np.where(segment[d:] == segment[:-d], np.minimum(m[d:], m[:-d]), m[d:])
        d *= 2
    return m


def walk(device: np.ndarray, chain: np.ndarray, late: np.ndarray, regained: np.ndarray, inside: np.ndarray,
         full: np.ndarray, tail: np.ndarray, launch: np.ndarray, none: int, launch_ns: int
         ) -> tuple[float, float, float]:
    """(point, low, high) idle given back over the gaps (``SplitTable.removed``): per gap the
    removed rows' device time and chain time (int64, 0 where none), the table's own columns."""
    sums = np.zeros(3)
    shift = 0
    for lo in range(0, len(late), BLOCK):
        hi = lo + BLOCK
        shift, add = _block(device[lo:hi], chain[lo:hi], late[lo:hi], regained[lo:hi], inside[lo:hi],
                            full[lo:hi], tail[lo:hi], launch[lo:hi], none, launch_ns, shift)
        for k in range(3):
            sums[k] = np.add.accumulate(np.concatenate([sums[k:k + 1], add[k]]))[-1]
    return float(sums[0]), float(sums[1]), float(sums[2])


def _block(device, chain, late, regained, inside, full, tail, launch, none, launch_ns, shift):
    """(the shift after the block, each sum's additions in order) for one block of gaps."""
    n = len(late)
    # the shift: restarts at 0 where the lead was regained; the block's first stretch starts from
    # the shift carried in, as if the running sum had fallen by it just before
    step = chain - late
    run = np.cumsum(step)
    starts = np.flatnonzero(regained)
    if not len(starts) or starts[0] != 0:
        starts = np.r_[0, starts]
    floor = run[starts] - step[starts]      # the running sum just before each stretch
    if not regained[0]:
        floor[0] -= shift
    base = np.full(n, np.iinfo(np.int64).max)
    base[starts] = floor
    after = run - _running_min(np.minimum(base, run), starts)     # the shift after each gap
    before = np.r_[shift, after[:-1]]               # the shift coming into each gap
    before = np.where(regained, 0, before) + chain  # with the gap's own chain
    cut = before - after
    hit = (late != 0) & (before != 0)
    beyond = late - np.minimum(late, tail)
    partial = hit & (cut < beyond)
    cleared = hit & ~partial & (beyond != 0)
    own = np.where(launch != none, launch, launch_ns)
    bottom = np.minimum(full, tail + own)
    w = inside
    x = np.where(partial, cut * w, 0.0)
    adds = [np.where(cleared, (full - bottom) * w, x),
            np.where(cleared, (full - np.minimum(full, np.maximum(bottom, full - beyond))) * w, x),
            np.where(cleared, (full - np.minimum(full, tail)) * w, x)]
    dev = device * w
    out = []
    for a in adds:
        both = np.empty(2 * n)
        both[0::2], both[1::2] = dev, a
        out.append(both)
    return int(after[-1]) if n else shift, out
