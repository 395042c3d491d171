"""The device's time by op name: what a program spends its device on, whatever it is.

For any imported trace (a training loop, vLLM, a CUDA program) the first question after "how
idle" is "busy with what": the ops that took the most device time in the window, over every
stream, each with its count and its share of all op time there. Ops running at once on
several streams each count in full (a share is of op time, not of wall time).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.runs import per_group
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.records import Trace

TOP_OPS = 10


class OpTime(NamedTuple):
    name: str
    count: int          # ops of that name in the window
    total_ns: int       # their time inside the window
    share: float        # of all ops' time inside the window


def top_ops(trace: Trace, window: tuple[int, int], limit: int = TOP_OPS) -> list[OpTime]:
    """The ``limit`` op names with the most device time inside ``window``, most first."""
    w0, w1 = window
    op, names = codes(trace.device_spans, "op")
    a = np.maximum(column(trace.device_spans, "t0"), w0)
    b = np.minimum(column(trace.device_spans, "t1"), w1)
    inside = a < b
    code, total_of = per_group(np.asarray(op)[inside], (b - a)[inside])
    count_of = np.bincount(np.asarray(op)[inside], minlength=len(names))
    total = {names[c]: t for c, t in zip(code.tolist(), total_of.tolist())}
    count = {names[c]: int(count_of[c]) for c in code.tolist()}
    every = sum(total.values())
    rows = sorted(total, key=lambda n: (-total[n], n))[:limit]
    return [OpTime(n, count[n], total[n], total[n] / every if every else 0.0) for n in rows]
