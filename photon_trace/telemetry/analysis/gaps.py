"""The analysed stream's ops in start order, and the gaps between them, as arrays.

Every pass of the analysis starts from the compute stream's ops sorted by start and the
gaps between merged runs of them. A long profile has millions of both: as Python objects
(a ``DeviceSpan`` per op, a ``Gap`` per gap) they cost hundreds of bytes each and a loop
per pass. ``Ops`` holds the sorted positions into ``trace.device_spans`` and the fields
the analysis reads, as arrays; ``Gaps`` holds each gap as positions into ``Ops``. Both
build the records on demand (``Ops.record``, ``Gaps[i]``), so the per-bubble attribution,
which needs a gap's ops by name, works on the few bubble-sized gaps only.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from photon_trace.telemetry.trace.columns import Columns, column
from photon_trace.telemetry.trace.lanes import primary_stream
from photon_trace.telemetry.trace.records import DeviceSpan, Trace

_I64 = np.int64
_BLOCK = 1 << 14   # gaps whose records are built at a time while iterating: bounded memory


class Gap(NamedTuple):
    """Device idle between two merged runs of compute ops (clipped to the window)."""
    t0: int
    t1: int
    prev: DeviceSpan   # the op whose end opened the gap
    next: DeviceSpan   # the op whose start closed it
    full_ns: int       # unclipped length, which decides bubble vs dispatch


def stream_mask(spans: Sequence, stream: str) -> np.ndarray:
    """Which of ``spans`` (device spans, a list or ``Columns``) run on ``stream``."""
    if isinstance(spans, Columns):
        table = spans.tables["stream"]
        return spans.arrays["stream"] == (table.index(stream) if stream in table else -1)
    return np.fromiter((d.stream == stream for d in spans), dtype=bool, count=len(spans))


class Ops:
    """``trace``'s ops on one stream (default: the primary one) in (start, end) order; ties keep
    the trace's order, as a stable sort of the records did."""

    __slots__ = ("spans", "order", "t0", "t1", "enqueued", "step")

    def __init__(self, trace: Trace, stream: str | None = None):
        self.spans = trace.device_spans
        mine = np.flatnonzero(stream_mask(self.spans, primary_stream(trace) if stream is None else stream))
        t0, t1 = column(self.spans, "t0")[mine], column(self.spans, "t1")[mine]
        order = np.lexsort((t1, t0))
        self.order = mine[order]
        self.t0, self.t1 = t0[order], t1[order]
        self.enqueued = column(self.spans, "enqueued")[self.order] if len(self.order) else np.empty(0, _I64)
        self.step = column(self.spans, "step")[self.order] if len(self.order) else np.empty(0, _I64)

    def __len__(self) -> int:
        return len(self.order)

    def record(self, i: int) -> DeviceSpan:
        """The ``i``-th op (in start order) as its record."""
        return self.spans[int(self.order[i])]

    def records_at(self, positions: np.ndarray) -> list[DeviceSpan]:
        """The ops at ``positions`` (in start order) as records, built a block at a time: from
        ``Columns``, one ``tolist`` per field instead of one numpy scalar per field and record."""
        if isinstance(self.spans, Columns):
            return list(self.spans.take(self.order[positions]))
        spans = self.spans
        return [spans[i] for i in self.order[positions].tolist()]

    def records(self) -> list[DeviceSpan] | Columns:
        """Every op, in start order: a list for a list of records, ``Columns`` for columns."""
        if isinstance(self.spans, Columns):
            return self.spans.take(self.order)
        return [self.spans[i] for i in self.order.tolist()]


class Gaps(Sequence):
    """Gaps as arrays: ``t0``, ``t1`` (clipped to the window), ``full_ns``, and the positions in
    ``ops`` of the op before (``prev``) and after (``next``) each; a ``Sequence`` of ``Gap``."""

    __slots__ = ("ops", "t0", "t1", "full_ns", "prev", "next")

    def __init__(self, ops: Ops, t0: np.ndarray, t1: np.ndarray, full_ns: np.ndarray, prev: np.ndarray,
                 nxt: np.ndarray):
        self.ops, self.t0, self.t1, self.full_ns, self.prev, self.next = ops, t0, t1, full_ns, prev, nxt

    @staticmethod
    def empty(ops: Ops) -> Gaps:
        e = np.empty(0, _I64)
        return Gaps(ops, e, e, e, e, e)

    @staticmethod
    def joined(ops: Ops, parts: list[Gaps]) -> Gaps:
        """The gaps of several windows over the same ``ops``, in the parts' order."""
        if not parts:
            return Gaps.empty(ops)
        return Gaps(ops, *(np.concatenate([getattr(p, f) for p in parts]) for f in ("t0", "t1", "full_ns", "prev", "next")))

    def take(self, index: Any) -> Gaps:
        return Gaps(self.ops, self.t0[index], self.t1[index], self.full_ns[index], self.prev[index],
                    self.next[index])

    def next_enqueued(self) -> np.ndarray:
        return self.ops.enqueued[self.next]

    def host_late_ns(self) -> int:
        """The gaps' time before their next op was enqueued: the host was late."""
        return int((np.minimum(np.maximum(self.next_enqueued(), self.t0), self.t1) - self.t0).sum())

    def __len__(self) -> int:
        return len(self.t0)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.take(i)
        return Gap(int(self.t0[i]), int(self.t1[i]), self.ops.record(self.prev[i]), self.ops.record(self.next[i]),
                   int(self.full_ns[i]))

    def __iter__(self):
        ops = self.ops
        for lo in range(0, len(self), _BLOCK):
            hi = lo + _BLOCK
            yield from map(Gap, self.t0[lo:hi].tolist(), self.t1[lo:hi].tolist(), ops.records_at(self.prev[lo:hi]),
                           ops.records_at(self.next[lo:hi]), self.full_ns[lo:hi].tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Gaps, list, tuple)):
            return len(self) == len(other) and all(x == y for x, y in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Gaps({len(self)} gaps)"


def gaps_between(ops: Ops, window: tuple[int, int]) -> Gaps:
    """Every gap between consecutive ``ops`` (after the furthest end so far) lying partly in
    ``window``: the op that reached that end first opens it, the next to start closes it."""
    w0, w1 = window
    n = len(ops)
    if n < 2:
        return Gaps.empty(ops)
    reach = np.maximum.accumulate(ops.t1)
    # the op holding the furthest end so far: the first to reach it (a later op only as far does not)
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = ops.t1[1:] > reach[:-1]
    holder = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    before = reach[:-1]
    nxt = np.flatnonzero(ops.t0[1:] > before) + 1
    a = np.maximum(before[nxt - 1], w0)
    b = np.minimum(ops.t0[nxt], w1)
    keep = a < b
    nxt = nxt[keep]
    return Gaps(ops, a[keep], b[keep], ops.t0[nxt] - before[nxt - 1], holder[nxt - 1], nxt)
