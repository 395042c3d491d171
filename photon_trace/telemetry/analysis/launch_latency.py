"""The device's own launch latency, as a trace measures it (``Attribution.launch_latency``).

A gap's queued part is the device's own only up to this; a cleared gap shrinks to it
(``diagnosis``).
"""
from __future__ import annotations

from typing import NamedTuple

from photon_trace.telemetry.trace.records import DeviceSpan


class LaunchLatency(NamedTuple):
    """How long the device takes to start an op where the host is on time, measured in the
    trace, apart for a step's first op and for the ops after it: a device may set a step up
    (the host-process device: ~20 us before a step's first op once the previous step's
    copy-back is done, ~10 us between its ops), so one median over both would call most of
    a step start's own latency the host's.

    Each is the median gap before an op of its kind already queued when the device ran dry
    (gaps spent waiting for a copy left out), from the end of the device's own tail work in it
    (``Attribution.tail``: 0 unless the device runs one op at a time). Where no step began with its op queued (a sync
    in every step, a blocking loop), a step start's is the 10th percentile of how long after
    its enqueue a late step's first op started, counting only starts after an idle no longer
    than the op before it: the device's quickest start while still warm (a host-process
    worker that idled longer has gone to sleep, and its slower wake-up is the lateness's
    cost, not the device's own). A kind with no evidence takes the other's."""
    step_start: int | None = None
    within_step: int | None = None

    def of(self, prev: DeviceSpan, nxt: DeviceSpan) -> int | None:
        first = nxt.step != prev.step
        own, other = (self.step_start, self.within_step) if first else (self.within_step, self.step_start)
        return own if own is not None else other

    @property
    def typical(self) -> int | None:
        """The one a step pays once: a step start's (else the other)."""
        return self.step_start if self.step_start is not None else self.within_step
