"""Which orders of device ops a profiler trace may hold, and which make it bad input.

**Possible, and counted**: ops on one stream that overlap. A stream runs its ops in order,
but "in order" no longer means one after another: with programmatic dependent launch (Hopper
and later, ``cudaLaunchKernelExC``/``cuLaunchKernelEx`` with the PDL attribute) a kernel
starts while its predecessor finishes, and a CUDA graph's independent nodes run side by side
though the profiler files them under the stream the graph was launched on. Such pairs are
counted per stream (``stream_overlaps``), with the longest overlap and the likely mechanism;
busy time is their union, so the analysis is unchanged by them. Overlaps no longer than the
clock's resolution are not counted: rounding makes those.

**Impossible, and bad input** (``impossible_order``): an op that ends before it starts, and
an op that starts before the call that launched it (by more than the clock's resolution):
no device runs work before it is given it, so such a trace's clock or events are damaged.
This is the importer's one rule on impossible orders; beside it, ``kineto_read`` applies the
rule every trace's times must keep (``telemetry/trace/plausible.py``: no time past 2**63 ns,
none days from the rest) before any order is looked at.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.trace.importers.kineto_events import Event
from photon_trace.telemetry.trace.importers.runtime_calls import EXTENSIBLE_LAUNCH_CALLS, GRAPH_LAUNCH_CALLS

PDL = "programmatic dependent launch"
GRAPH_NODES = "a CUDA graph's parallel nodes"
EITHER = "programmatic dependent launch or a graph's parallel nodes"


def impossible_order(op: Event, call: Event | None, resolution_ns: int) -> str | None:
    """Why device op ``op`` (launched by ``call``, None when unknown) cannot have happened as
    recorded, or None. The message names the event and, for a launch, the call."""
    label = f"event {op.index} ({op.kind} {op.name[:60]!r})"
    if op.t1 < op.t0:
        return f"{label}: ends {(op.t0 - op.t1) / 1000:.3f} µs before it starts"
    if call is not None and op.t0 < call.t0 - resolution_ns:
        return (f"{label}: starts {(call.t0 - op.t0) / 1000:.3f} µs before its own launch (event {call.index}, "
                f"{call.name}): the device cannot run work before it is given it")
    return None


class Overlaps(NamedTuple):
    """Pairs of ops on one stream that ran at once."""
    pairs: int
    max_ns: int
    first: str       # the first pair, by event index
    how: str         # the likely mechanism (``PDL``, ``GRAPH_NODES`` or ``EITHER``)


def stream_overlaps(lanes: np.ndarray, t0: np.ndarray, t1: np.ndarray, event_of, call_name,
                    resolution_ns: int) -> dict[int, Overlaps]:
    """Per stream, the pairs of ops that overlap by more than ``resolution_ns``: each op against
    the op that ran furthest before it. The ops are sorted by (lane code, start, end);
    ``event_of(i)`` is op ``i``'s ``Event`` (for the message), ``call_name(i)`` the name of the
    call that launched it ("" when unknown). Keys are lane codes."""
    out = {}
    cut = np.flatnonzero(lanes[1:] != lanes[:-1]) + 1
    bounds = np.concatenate([[0], cut, [len(lanes)]]).tolist()
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b - a < 2:
            continue
        s0, s1 = t0[a:b], t1[a:b]
        reach = np.maximum.accumulate(s1)
        end = reach[:-1]                         # the latest end before each op from the second on
        pair = np.flatnonzero(end - s0[1:] > resolution_ns) + 1
        if not len(pair):
            continue
        longest = int((np.minimum(reach[pair - 1], s1[pair]) - s0[pair]).max())
        j = int(pair[0])
        last = int(np.searchsorted(reach, reach[j - 1], side="left"))   # the op that set that end first
        op, prev = event_of(a + j), event_of(a + last)
        first = (f"event {op.index} ({op.name[:60]!r}) starts {(int(reach[j - 1]) - op.t0) / 1000:.3f} µs before "
                 f"event {prev.index} ({prev.name[:60]!r}) ends")
        calls = {call_name(a + int(i)) for i in pair}
        out[int(lanes[a])] = Overlaps(len(pair), longest, first, _mechanism(calls))
    return out


def _mechanism(calls: set[str]) -> str:
    if calls and calls <= EXTENSIBLE_LAUNCH_CALLS:
        return PDL
    if calls and calls <= GRAPH_LAUNCH_CALLS:
        return GRAPH_NODES
    return EITHER


def overlap_line(lane: str, o: dict) -> str:
    """One line for a report: "74 kernel pairs overlap on gpu0 stream 7, up to 3.7 µs: programmatic
    dependent launch" (``o``: an ``Overlaps`` as the header keeps it, a dict)."""
    return (f"{o['pairs']:,} kernel pair{'s' if o['pairs'] != 1 else ''} overlap on {lane}, up to "
            f"{o['max_ns'] / 1000:.1f} µs: {o['how']} (busy time is their union)")
