"""Idle per device, all its streams together: Nsight Systems' view of GPU idle, beside ours.

Our analysis looks at one stream at a time (``streams.stream_stats``): a stream is idle
between its own ops, whatever the others do. Nsight's GPU rules look at a device (in a
process): it is idle only while none of its streams runs anything. On a program whose
streams overlap the two differ a lot — four streams each idle 63% of their spans can keep
their device 95% busy — and both are true: the stream view says where each stream waits,
the device view whether the hardware sat unused.

A device's busy time is the union of its ops on every stream, plus the profiler's own
stalls inside its span that nsys counts as busy (``header["profiler_overhead"]``: the user
cannot remove them); its span runs from its first op's start to its last op's end, inside
the window when one is given (as ``stream_stats`` measures a stream). Devices come from
``trace.lanes.device_of``: ``gpu0`` for ``gpu0 stream 7``, ``pid 12 gpu0`` when a report
has several processes, and one ``device`` for our engine's compute and copy streams.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.no_work import NoWork
from photon_trace.telemetry.trace.columns import Columns, column, encode
from photon_trace.telemetry.trace.distinct import first_of_each
from photon_trace.telemetry.trace.lanes import device_of
from photon_trace.telemetry.trace.records import Trace


class DeviceIdle(NamedTuple):
    device: str
    streams: int
    ops: int
    span_ns: int           # first op start to last op end (inside the window)
    busy_ns: int           # union of every stream's ops (and the profiler's counted stalls)
    idle_ns: int
    gaps: int              # idle stretches between busy runs
    longest_gap_ns: int

    @property
    def idle_fraction(self) -> float:
        return self.idle_ns / self.span_ns if self.span_ns else 0.0


def device_ops(trace: Trace) -> dict[str, tuple[np.ndarray, np.ndarray, set[str]]]:
    """Per device (in order of its first op): its ops' starts and ends (by start) and the
    streams they ran on. Read as columns: the dashboard's Panels ask this of traces of
    millions of ops."""
    ops = trace.device_spans
    if not len(ops):
        return {}
    if isinstance(ops, Columns):
        codes, table = ops.arrays["stream"], ops.tables["stream"]
    else:
        codes, table = encode(d.stream for d in ops)
    t0, t1 = column(ops, "t0"), column(ops, "t1")
    present, first, _ = first_of_each(codes)
    present = present[np.argsort(first, kind="stable")]          # streams in order of their first op
    device = {int(c): device_of(trace, table[c]) for c in present.tolist()}
    out = {}
    for dev in dict.fromkeys(device.values()):
        mine = [c for c, d in device.items() if d == dev]
        m = np.isin(codes, mine)
        a, b = t0[m], t1[m]
        o = np.argsort(a, kind="stable")
        out[dev] = (a[o], b[o], {table[c] for c in mine})
    return out


def with_overhead(trace: Trace, device: str, t0: np.ndarray, t1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``device``'s ops with the profiler's stalls that count as its busy time, by start."""
    extra = (trace.header.get("profiler_overhead") or {}).get(device) or []
    if not extra:
        return t0, t1
    e = np.asarray(extra, dtype=np.int64).reshape(-1, 2)
    a, b = np.concatenate([t0, e[:, 0]]), np.concatenate([t1, e[:, 1]])
    o = np.argsort(a, kind="stable")
    return a[o], b[o]


def busy_runs(t0: np.ndarray, t1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals (sorted by start) as disjoint runs ``(starts, ends)``."""
    if not len(t0):
        return t0, t1
    reach = np.maximum.accumulate(t1)
    new = np.concatenate([[True], t0[1:] > reach[:-1]])
    first = np.flatnonzero(new)
    return t0[first], np.maximum.reduceat(t1, first)


def device_idle(trace: Trace, window: tuple[int, int] | None = None) -> list[DeviceIdle]:
    """One row per device with an op in ``window`` (the whole trace when None), by name. Its span
    leaves out the time the engine had nothing to run (``no_work``): that idle is no one's."""
    rows = []
    no_work = NoWork(trace)
    for dev, (t0, t1, streams) in sorted(device_ops(trace).items()):
        a, b = with_overhead(trace, dev, t0, t1)
        if window is not None:
            keep = (b > window[0]) & (a < window[1])
            n_ops = int(np.count_nonzero((t1 > window[0]) & (t0 < window[1])))
            a, b = np.clip(a[keep], *window), np.clip(b[keep], *window)
            if not n_ops:
                continue
        else:
            n_ops = len(t0)
        s, e = busy_runs(a, b)
        if not len(s):
            continue
        span = int(e[-1] - s[0]) - no_work.overlap_ns(int(s[0]), int(e[-1]))
        busy = int(np.sum(e - s))
        gaps = s[1:] - e[:-1]
        rows.append(DeviceIdle(dev, len(streams), n_ops, span, busy, span - busy, int(len(gaps)),
                               int(gaps.max()) if len(gaps) else 0))
    return rows


def idle_stretches(trace: Trace) -> list[tuple[str, int, int]]:
    """Every stretch in which a device ran nothing, between its first op and its last, over the
    whole trace: ``(device, t0, t1)`` by device, then time (what the Perfetto export and the
    dashboard draw as the device's idle)."""
    out = []
    for dev, (t0, t1, _) in sorted(device_ops(trace).items()):
        s, e = busy_runs(*with_overhead(trace, dev, t0, t1))
        out += [(dev, int(a), int(b)) for a, b in zip(e[:-1].tolist(), s[1:].tolist())]
    return out


__all__ = ["DeviceIdle", "device_idle", "device_ops", "busy_runs", "with_overhead", "idle_stretches"]
