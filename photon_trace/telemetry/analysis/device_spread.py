"""Device time as a finding: how each device op's duration spreads, and when its slow tail costs.

The bubbles say where the device sat idle; they say nothing when the device itself is slow.
A forward that now and then takes three times its usual time (a slower kernel path for some
shapes, a throttled or shared device, a worker descheduled mid-op) leaves no gap anywhere, yet
removing it may be worth more than every bubble. So, per op name in the analysis window:

* ``OpSpread``: count, the p50 / p90 / p99 of its durations (nearest rank), its total device
  time, and its **tail cost**: the time its ops spent above the median, summed
  (``sum(max(0, d - p50))``): what the device would give back were every op of that name as
  fast as its median one.
* ``DeviceFinding``: a device-side row when an op's tail cost is at least ``TAIL_SHARE`` (20%) of
  all device time in the window (every op of every stream, as ``top_ops`` counts it). 20%, because
  a healthy op's spread on a busy shared machine already costs up to about half that (the tiny
  model on the host-process device beside other engineers' test runs, load ~4 on 2 cores: forward
  7.5%, sample 12.3% of device time, the worker descheduled now and then mid-op; the sample
  traces in ``traces/``, recorded on a quiet machine: forward 3-10%), while one decode
  forward in four taking 2 periods longer costs about a third (34% measured, the fault test's
  family). Its words say how often the op is slow (at least ``SLOW_FACTOR`` times its median), by
  how much (the slow ones' median over the median) and what that costs: "forward: 1 step in 4
  takes 3.2x the median, 34% of device time". Who fixes it: the device side (the kernel, the
  device's clock or sharing), never host code, so every report lists it apart from the host-code
  rows.
* ``compare_ops``: the median per op of two reports side by side (old, new, ratio), for ``check
  --baseline``: a device that got slower in one op shows there even when the period hides it.

Only ops that ran entirely inside the window count: a clipped op's duration is not its own.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.records import Trace

TAIL_SHARE = 0.20
"""An op's tail cost at least this share of the window's device time is a finding."""
SLOW_FACTOR = 1.5
"""An op this many times its median or more is a slow one (the finding's "1 step in N")."""
MIN_OPS = 8
"""Fewer ops of a name than this: too few for a spread, no finding."""


class OpSpread(NamedTuple):
    op: str
    count: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    total_ns: int
    tail_ns: int        # time above the median, summed over the op's runs
    tail_share: float   # of all device time in the window
    slow: int = 0       # runs at least SLOW_FACTOR x the median
    slow_p50_ns: int = 0   # the slow runs' median duration (0: none)


class DeviceFinding(NamedTuple):
    """A device-side row: an op whose slow tail costs at least ``TAIL_SHARE`` of device time."""
    op: str
    every: float        # one run in ``every`` is slow
    factor: float       # the slow runs' median over the op's median
    tail_ns: int
    share: float        # of all device time in the window

    @property
    def words(self) -> str:
        return (f"{self.op}: 1 step in {self.every:.0f} takes {self.factor:.1f}x the median, "
                f"{self.share:.0%} of device time")


class OpChange(NamedTuple):
    """One op's median in a baseline and in the trace checked against it."""
    op: str
    old_p50_ns: int
    new_p50_ns: int
    ratio: float        # new over old (inf: an op the baseline did not run)


def _rank(sorted_ns: np.ndarray, q: float) -> int:
    """The nearest-rank ``q`` quantile of ``sorted_ns`` (non-empty)."""
    return int(sorted_ns[max(0, min(len(sorted_ns) - 1, math.ceil(q * len(sorted_ns)) - 1))])


def op_spreads(trace: Trace, window: tuple[int, int]) -> list[OpSpread]:
    """Per op name, the spread of the durations of its runs inside ``window``; the costliest
    tail first."""
    w0, w1 = window
    op, names = codes(trace.device_spans, "op")
    t0, t1 = column(trace.device_spans, "t0"), column(trace.device_spans, "t1")
    inside = (w0 <= t0) & (t1 <= w1)
    op, length = np.asarray(op)[inside], (t1 - t0)[inside]
    order = np.lexsort((length, op))     # by op, each op's durations sorted
    op, length = op[order], length[order]
    start = np.flatnonzero(np.append(True, op[1:] != op[:-1])) if len(op) else np.empty(0, np.int64)
    every = int(length.sum())
    out = []
    for code, ns in zip(op[start].tolist(), np.split(length, start[1:])):
        p50 = _rank(ns, 0.5)
        tail = int((ns[ns > p50] - p50).sum())
        slow = ns[ns >= SLOW_FACTOR * p50] if p50 > 0 else ns[:0]
        out.append(OpSpread(names[code], len(ns), p50, _rank(ns, 0.9), _rank(ns, 0.99), int(ns.sum()), tail,
                            tail / every if every else 0.0, len(slow), _rank(slow, 0.5) if len(slow) else 0))
    return sorted(out, key=lambda s: (-s.tail_ns, s.op))


def device_findings(spreads: list[OpSpread], share: float = TAIL_SHARE) -> list[DeviceFinding]:
    """A row per op whose slow tail costs at least ``share`` of device time, costliest first."""
    return [DeviceFinding(s.op, s.count / s.slow if s.slow else float(s.count),
                          s.slow_p50_ns / s.p50_ns if s.slow and s.p50_ns else 1.0, s.tail_ns, s.tail_share)
            for s in spreads if s.count >= MIN_OPS and s.tail_share >= share]


def compare_ops(old: list[OpSpread], new: list[OpSpread]) -> list[OpChange]:
    """Each op of ``new`` beside the same op of ``old``: medians and their ratio, most grown first.
    Ops only the baseline ran are left out: the trace checked did not run them."""
    before = {s.op: s.p50_ns for s in old}
    rows = [OpChange(s.op, before.get(s.op, 0), s.p50_ns,
                     s.p50_ns / before[s.op] if before.get(s.op) else float("inf")) for s in new]
    return sorted(rows, key=lambda c: (-c.ratio, c.op))
