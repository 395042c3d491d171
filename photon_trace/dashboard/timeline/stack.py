"""An imported trace's host lanes as call stacks: one row per depth, as Perfetto draws them.

A profiler's host events nest (a Python function, the aten op it calls, the CUDA runtime call
that one makes); drawn in one row they cover each other and the stack is lost. Each span's
depth is the number of spans of its thread still open when it starts (a child that outlives
its parent is still drawn below it: nothing is hidden).
"""
from __future__ import annotations

import numpy as np


def stack_depths(thread: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Per span (``thread`` code, start, end), its depth in its thread's call stack."""
    out = np.zeros(len(t0), dtype=np.int32)
    if not len(t0):
        return out
    order = np.lexsort((-t1, t0, thread))   # by thread, then start; a parent before its child
    th, s0, s1 = thread[order].tolist(), t0[order].tolist(), t1[order].tolist()
    depth = [0] * len(order)
    open_ends: list[int] = []
    current = None
    for n in range(len(order)):
        if th[n] != current:
            current, open_ends = th[n], []
        while open_ends and open_ends[-1] <= s0[n]:
            open_ends.pop()
        depth[n] = len(open_ends)
        open_ends.append(s1[n])
    out[order] = depth
    return out


def rows_per_thread(thread: np.ndarray, depth: np.ndarray, n_threads: int) -> list[int]:
    """How many rows each thread's lane needs: its deepest span's depth, plus one."""
    rows = np.ones(n_threads, dtype=np.int64)
    if len(depth):
        np.maximum.at(rows, thread, depth.astype(np.int64) + 1)
    return rows.tolist()
