"""The loaded form of a trace: what analysis, the dashboard and exporters consume; and
``Chunk``, the fragment of one that a recorder hands its sinks.

Names (phase, op, stream, kind, event) are the lower-case enum names from
``tracer.py`` so a trace reads without the enums. Times are host monotonic ns.
A host span's and a wait's ``cpu_ns``/``runq_ns`` are the recording thread's own
counters over it (``recording/thread_clock.py``): whether the host ran, was runnable
but not running, or neither; -1 where nothing measured them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class HostSpan(NamedTuple):
    phase: str     # plan | launch | commit | finalize | stage | mask_build | mask_upload | stream_out
    step: int
    slot: int
    t0: int
    t1: int
    thread: str    # host thread name, one timeline lane each
    cpu_ns: int = -1   # the thread's on-CPU time inside the span (-1: not recorded: imports, version-1 files)
    runq_ns: int = -1  # its run-queue wait inside it: runnable, not running (-1: not recorded)


class DeviceSpan(NamedTuple):
    stream: str    # compute | copy
    op: str        # prefill | forward | sample | masked_sample | copy_back | mask_upload | stage
    step: int
    slot: int
    t0: int
    t1: int
    enqueued: int  # host time the op was issued: a gap whose next op was enqueued late is host-bound
    runq_t0: int = -1  # the device thread's run-queue counter (cumulative ns runnable, not running) at
    runq_t1: int = -1  # t0 and t1: the host-process worker's own; -1: not measured (a GPU, imports, v1-2 files)


COMPUTE_OPS = frozenset({"stage", "prefill", "forward", "sample", "masked_sample"})
"""The ops the engine runs on its compute stream (a ``DeviceSpan.op``)."""


class HostWait(NamedTuple):
    reason: str    # e.g. "commit: copy-back", "mask upload: drain (sync)"
    expected: bool
    t0: int
    t1: int
    site: str      # file:line of the first frame outside the device layer
    step: int
    cpu_ns: int = -1   # the waiting thread's on-CPU time inside the wait (-1: not recorded)
    runq_ns: int = -1  # its run-queue wait inside it: runnable, not running (-1: not recorded)


class StepRecord(NamedTuple):
    step: int
    kind: str      # decode | prefill | mixed
    slot: int
    rows: int
    zombie_rows: int
    constrained_rows: int
    tokens: int    # tokens appended at this step's commit


class RequestRecord(NamedTuple):
    req_id: int
    event: str     # arrival | admitted | first_token | finalized | freed | aborted
    t: int
    tokens: int


RECORD_KINDS = ("host_spans", "device_spans", "waits", "steps", "requests")
"""The record lists of a ``Trace`` (and of a ``Chunk``), in file order."""


@dataclass
class Trace:
    """A whole trace. ``header`` holds settings, model, backend, device, host,
    clock anchors (``clock``: {"wall_ns", "mono_ns", "device_error_ns"}) and version.

    A record list may be a ``columns.Columns`` instead (large imports): the same
    ``Sequence`` of records, one array per field; ``columns.column`` reads either."""
    header: dict
    host_spans: list[HostSpan] = field(default_factory=list)
    device_spans: list[DeviceSpan] = field(default_factory=list)
    waits: list[HostWait] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    requests: list[RequestRecord] = field(default_factory=list)


@dataclass
class Chunk(Trace):
    """A fragment of a trace: the records a recorder drained in one flush (a chunk line of
    the file), in recording order (a host span is recorded when it ends), and as ``header``
    only the header fields set by ``describe()`` since the sinks were opened (empty: none)."""
    header: dict = field(default_factory=dict)
    seq: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # kind -> records lost to ring wrap-around

    def __len__(self) -> int:
        return sum(len(getattr(self, k)) for k in RECORD_KINDS)
