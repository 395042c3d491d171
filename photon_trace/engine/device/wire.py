"""The host-process device's wire form of a launch's host-known values: plain tuples.

A step's commands cross to the worker pickled (``ring.py``). Unpickling a class instance (a frozen dataclass,
an enum, a named tuple) runs Python code per object, and the worker reads a step's batch
on its critical path whenever the step was queued early, right after a forward has
streamed the weights through the caches: a batch carrying a ``LaunchShape`` and a
``SamplingMode`` took ~36 us to unpickle that cold against ~6 us for the same values as
tuples of ints (``benchmarks/bench_wire_unpickle.py``). So they travel as tuples,
and the worker turns each distinct one back into its object once (a decode step's shape
repeats for many steps).
"""
from __future__ import annotations

from photon_trace.engine.device.base import LaunchShape
from photon_trace.engine.device.sampling import SamplePath, SamplingMode
from photon_trace.engine.model.segments import Segment

_CACHE_LIMIT = 4096     # distinct shapes kept; a long run's growing page counts make new ones


def shape_to_wire(shape: LaunchShape) -> tuple:
    return (shape.num_tokens, shape.num_rows, shape.max_pages, shape.max_query_len, shape.prefill,
            tuple(tuple(s) for s in shape.segments))


def mode_to_wire(mode: SamplingMode) -> tuple:
    return (int(mode.path), mode.k, mode.penalties, mode.logprobs, mode.top_logprobs, mode.min_p)


class FromWire:
    """The worker's side: each distinct wire tuple back to its object, kept for the next time."""

    def __init__(self) -> None:
        self._shapes: dict[tuple, LaunchShape] = {}
        self._modes: dict[tuple, SamplingMode] = {}

    def shape(self, w: tuple) -> LaunchShape:
        shape = self._shapes.get(w)
        if shape is None:
            if len(self._shapes) >= _CACHE_LIMIT:
                self._shapes.clear()
            num_tokens, num_rows, max_pages, max_query_len, prefill, segments = w
            shape = self._shapes[w] = LaunchShape(
                num_tokens=num_tokens, num_rows=num_rows, max_pages=max_pages, max_query_len=max_query_len,
                prefill=prefill, segments=tuple(Segment(*s) for s in segments))
        return shape

    def mode(self, w: tuple) -> SamplingMode:
        mode = self._modes.get(w)
        if mode is None:
            mode = self._modes[w] = SamplingMode(SamplePath(w[0]), *w[1:])
        return mode
