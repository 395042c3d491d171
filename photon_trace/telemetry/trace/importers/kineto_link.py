"""Which runtime call launched each device op, and which step each moment is in: over columns.

**Launches.** A device op names its launch by correlation id; lacking one that a runtime call
has, by its ``ac2g`` flow (the flow ending at the op's thread and start, whose start is at the
call's). When ids repeat, the last call with the id counts (as a dict built in file order
would). Correlation ids are looked up with ``np.searchsorted`` over the calls' ids; the flows,
which a trace holds two per kernel, are only turned into lookups for the ops left unlinked.

**Pageable copies** (``pageable_copies``): the copy calls that made the host wait for their
stream, by the copy's name (CUDA) or by when the call returned (ROCm).

**Steps.** ``ProfilerStep#N`` annotations (or the ``--step-annotation`` name), by start; a
moment's step is the last one begun at or before it, -1 before the first, 0 for every moment
when there are none.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

from photon_trace.telemetry.trace.distinct import member
from photon_trace.telemetry.trace.importers.kineto_events import CODE, ODD, Event, EventTable, Flows

_STEP_NUMBER = re.compile(r"#(\d+)$")


class Launches:
    """The runtime calls (rows of the event table) by correlation id."""

    def __init__(self, events: EventTable, calls: np.ndarray):
        self.events = events
        corr = events.corr[calls]
        ints = corr > ODD
        keys, rows = corr[ints], calls[ints]
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], rows[order]
        last = np.ones(len(keys), dtype=bool)          # the last call of each id, in file order
        last[:-1] = keys[1:] != keys[:-1]
        self.keys, self.rows = keys[last], rows[last]
        self.odd = {events.odd_corr[int(events.index[r])]: int(r) for r in calls[corr == ODD]}

    def by_correlation(self, rows: np.ndarray) -> np.ndarray:
        """The call row launching each of ``rows`` by correlation id, -1 where none."""
        corr = self.events.corr[rows]
        out = np.full(len(rows), -1, dtype=np.int64)
        if len(self.keys):
            pos = np.minimum(np.searchsorted(self.keys, corr), len(self.keys) - 1)
            hit = (self.keys[pos] == corr) & (corr > ODD)
            out[hit] = self.rows[pos[hit]]
        for j in np.flatnonzero(corr == ODD).tolist():
            v = self.events.odd_corr[int(self.events.index[rows[j]])]
            out[j] = self.odd.get(v, -1) if _hashable(v) else -1
        return out

    def has(self, value) -> bool:
        """Whether a call carries correlation id ``value`` (a ``cuda_sync`` record's)."""
        if type(value) is int and len(self.keys):
            pos = min(int(np.searchsorted(self.keys, value)), len(self.keys) - 1)
            if self.keys[pos] == value:
                return True
        return _hashable(value) and value in self.odd


def _hashable(v) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def by_flow(events: EventTable, ops: np.ndarray, calls: np.ndarray, starts: Flows, ends: Flows) -> np.ndarray:
    """The call row launching each of ``ops`` (device op rows) by ac2g flow, -1 where none."""
    out = np.full(len(ops), -1, dtype=np.int64)
    if not len(ops) or not len(ends.ns):
        return out
    at = member(ends.ns, events.t0[ops])              # only the flows that can end at these ops
    end_of = {}
    for r in np.flatnonzero(at).tolist():
        end_of[(int(ends.thread[r]), int(ends.ns[r]))] = ends.odd.get(r, int(ends.id[r]))
    wanted = {v for v in end_of.values() if _hashable(v)}
    start_of = {}
    ids = starts.id
    if starts.odd:
        candidates = range(len(ids))
    else:
        ints = np.array([v for v in wanted if type(v) is int and v > ODD], dtype=np.int64)
        candidates = np.flatnonzero(np.isin(ids, ints)).tolist()
    for r in candidates:
        fid = starts.odd.get(r, int(ids[r]))
        if _hashable(fid) and fid in wanted:
            start_of[fid] = (int(starts.thread[r]), int(starts.ns[r]))
    places = set(start_of.values())
    launch_at = {}
    for r in calls[np.isin(events.t0[calls], [ns for _, ns in places])].tolist():
        launch_at[(int(events.thread[r]), int(events.t0[r]))] = r
    for j, op in enumerate(ops.tolist()):
        fid = end_of.get((int(events.thread[op]), int(events.t0[op])))
        start = start_of.get(fid) if fid is not None and _hashable(fid) else None
        if start is not None:
            out[j] = launch_at.get(start, -1)
    return out


class Steps:
    """Step annotations in time order; ``of(t)`` is the step running at host time(s) ``t``."""

    def __init__(self, events: EventTable, host: np.ndarray, name: str, *, explicit: bool, path: str):
        self.name = name
        self.is_step_name = np.array([self._matches(n) for n in events.names], dtype=bool)
        ann = host[events.kind[host] == CODE["user_annotation"]]
        marks = ann[self.is_step_name[events.name[ann]]] if len(events.names) else ann[:0]
        marks = marks[np.argsort(events.t0[marks], kind="stable")]
        if explicit and not len(marks):
            seen = Counter(events.names[c].split("#")[0] for c in events.name[ann].tolist())
            common = ", ".join(repr(n) for n, _ in seen.most_common(8)) or "none"
            from photon_trace.telemetry.trace.importers.kineto_read import KinetoFormatError
            raise KinetoFormatError(f"{path}: no annotation named {name!r} to take steps from "
                                    f"(annotations in the trace: {common})")
        self.count = len(marks)
        self.starts = events.t0[marks]
        ids = []
        for i, c in enumerate(events.name[marks].tolist()):
            m = _STEP_NUMBER.search(events.names[c])
            ids.append(int(m.group(1)) if m else i)
        self.ids = np.array(ids, dtype=np.int64)

    def _matches(self, n: str) -> bool:
        return n == self.name or (n.startswith(self.name + "#") and _STEP_NUMBER.search(n) is not None)

    def is_step(self, e: Event) -> bool:
        return e.kind == "user_annotation" and self._matches(e.name)

    def of(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.int64)
        if not self.count:
            return np.zeros(t.shape, dtype=np.int64)
        i = np.searchsorted(self.starts, t, side="right") - 1
        return np.where(i >= 0, self.ids[np.maximum(i, 0)], -1)

    def at(self, t: int) -> int:
        return int(self.of(np.array([t]))[0])


def pageable_copies(ev: EventTable, device: np.ndarray, launcher: np.ndarray, lanes: np.ndarray,
                     t0: np.ndarray, t1: np.ndarray) -> dict[int, int]:
    """call row -> the row of the copy it made between the device and pageable host memory.

    CUDA's traces name the memory (``Memcpy DtoH (Device -> Pageable)``). ROCm's say ``Host``
    whatever it was: there a copy counts as pageable when its call returned only after the copy
    ran and the stream still had earlier work when the call was made (the host waited for the
    stream to drain, which a copy from pinned memory does not do). ``lanes``, ``t0``, ``t1``:
    the device ops sorted by (lane, start, end)."""
    out: dict[int, int] = {}
    copies = np.flatnonzero((ev.kind[device] == CODE["gpu_memcpy"]) & (launcher >= 0))
    if not len(copies):
        return out
    reach: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}
    for j in copies.tolist():
        dev, call = int(device[j]), int(launcher[j])
        name = ev.names[ev.name[dev]]
        if "Pageable" in name:
            out[call] = dev
        elif "Host" in name and "Async" in ev.names[ev.name[call]] and ev.t1[call] >= ev.t1[dev]:
            lane = int(ev.lane[dev])
            if lane not in reach:
                a, b = np.searchsorted(lanes, lane, side="left"), np.searchsorted(lanes, lane, side="right")
                reach[lane] = (int(a), t0[a:b], np.maximum.accumulate(t1[a:b]))
            _, starts, ends = reach[lane]
            i = int(np.searchsorted(starts, ev.t0[dev], side="left")) - 1   # the last op starting before the copy
            if i >= 0 and ends[i] > ev.t0[call]:
                out[call] = dev
    return out
