"""Collectives across ranks: who arrived last, and how long the others waited for it.

A collective (an all-reduce, a broadcast, a send/receive pair) cannot finish on any rank
before every rank has reached it: each rank's kernel runs from its own start, waits for the
last rank to arrive, then moves the data. So per collective, with ``s`` a rank's start, ``e``
its end and ``last`` the latest start of any rank:

* **wait** = ``min(last, e) - s``: the part of its kernel spent waiting for the straggler;
* **transfer** = ``e - max(s, last)``: the part after everyone arrived, the collective's own cost.

A long wait against a short transfer says the job is held by a slow rank, not by the network.
These are device kernels named like NCCL's and RCCL's (``ncclKernel_AllReduce_…``,
``ncclDevKernel_…``: Holistic Trace Analysis' definition of a communication kernel); a trace with
none (gloo on the CPU) has its collectives as ``gloo:…`` host ranges, read the same way.
The n-th collective of a kind on one rank is matched with the n-th of that kind on the others:
ranks issue a group's collectives in one order. Times are on the job's clock, so a wait shorter
than the clocks' alignment error cannot be told from none (``ranks.py`` says that error).
"""
from __future__ import annotations

import re
from collections import defaultdict
from statistics import median
from typing import NamedTuple

from photon_trace.telemetry.trace.records import Trace

COMM_KERNEL = re.compile(r"nccl.*Kernel")
"""A communication kernel, as Holistic Trace Analysis defines it (matched at the name's start)."""
_KIND = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
HOST_COLLECTIVE = re.compile(r"(gloo|mpi|ucc):(\w+)")
ALL_RANKS = re.compile(r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|barrier", re.I)
"""Kinds that end on every rank together (each rank needs every other's data); a send/receive
or a broadcast may end on one rank well before another."""


class Collective(NamedTuple):
    """One matched collective: its kind, its index among that kind, each rank's start and end."""
    kind: str
    index: int
    starts: dict[int, int]
    ends: dict[int, int]

    @property
    def last(self) -> int:
        """The rank that arrived last (the straggler)."""
        return max(self.starts, key=lambda r: (self.starts[r], r))

    def wait_ns(self, rank: int) -> int:
        last = self.starts[self.last]
        return max(0, min(last, self.ends[rank]) - self.starts[rank])

    def transfer_ns(self, rank: int) -> int:
        return max(0, self.ends[rank] - max(self.starts[rank], self.starts[self.last]))

    @property
    def end_spread_ns(self) -> int:
        """How far apart the ranks' ends are: a collective ends on all ranks at about one moment."""
        return max(self.ends.values()) - min(self.ends.values())


class RankWaits(NamedTuple):
    rank: int
    collectives: int
    last: int           # collectives it arrived at last
    wait_ns: int        # in all its collectives, waiting for the last rank
    transfer_ns: int    # in all its collectives, after every rank arrived


def is_comm_kernel(name: str) -> bool:
    return COMM_KERNEL.match(name) is not None


def comm_kind(name: str) -> str | None:
    """A collective's kind (``AllReduce``, ``all_reduce``), or None for an op that is not one."""
    m = _KIND.match(name)
    if m:
        return m.group(1)
    if is_comm_kernel(name):
        return name.split("(")[0]
    m = HOST_COLLECTIVE.match(name)
    return m.group(2) if m else None


def rank_collectives(trace: Trace) -> dict[str, list[tuple[int, int]]]:
    """A rank's collectives by kind, in time order: its communication kernels, else (no device
    collective at all) its host collective ranges."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for d in trace.device_spans:
        if is_comm_kernel(d.op):
            out[comm_kind(d.op)].append((d.t0, d.t1))
    if not out:
        for h in trace.host_spans:
            m = HOST_COLLECTIVE.match(h.phase)
            if m and h.phase == m.group(0):
                out[m.group(2)].append((h.t0, h.t1))
    for spans in out.values():
        spans.sort()
    return dict(out)


def match_collectives(ranks: list[tuple[int, Trace]]) -> tuple[list[Collective], dict[str, int]]:
    """The collectives every rank ran, matched by kind and order, in time order; and per kind how
    many a rank ran beyond the others (unmatched)."""
    per = {r: rank_collectives(t) for r, t in ranks}
    kinds = set().union(*per.values()) if per else set()
    out: list[Collective] = []
    unmatched: dict[str, int] = {}
    for kind in sorted(kinds):
        counts = [len(per[r].get(kind, ())) for r, _ in ranks]
        n = min(counts)
        if max(counts) > n:
            unmatched[kind] = max(counts) - n
        for i in range(n):
            out.append(Collective(kind, i, {r: per[r][kind][i][0] for r, _ in ranks},
                                  {r: per[r][kind][i][1] for r, _ in ranks}))
    out.sort(key=lambda c: min(c.starts.values()))
    return out, unmatched


def rank_waits(collectives: list[Collective]) -> list[RankWaits]:
    """Per rank, what its collectives cost: waiting for the last rank, and the transfer itself."""
    ranks = sorted({r for c in collectives for r in c.starts})
    return [RankWaits(r, len(collectives), sum(1 for c in collectives if c.last == r),
                      sum(c.wait_ns(r) for c in collectives), sum(c.transfer_ns(r) for c in collectives))
            for r in ranks]


def end_spread_ns(collectives: list[Collective]) -> int | None:
    """The median spread across ranks of the ends of the collectives that end on every rank
    together (``ALL_RANKS``): a bound on how far the ranks' clocks disagree (None without one)."""
    spreads = [c.end_spread_ns for c in collectives if ALL_RANKS.search(c.kind)]
    return int(median(spreads)) if spreads else None
