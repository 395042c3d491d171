"""The device interface the scheduler drives; both backends implement it.

Device work is a small set of named operations on a slot. Every host wait goes
through ``_host_wait`` with a reason and whether the design expects it, so the
tracer can tell the commit's expected wait from an accidental synchronisation,
and name the line of code that caused it.
"""
from __future__ import annotations

import os
import sys
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.tracer import NULL_TRACER, DeviceOp, Stream, Tracer, now_ns
from photon_trace.engine.model.segments import Segment
from photon_trace.engine.device.sampling import SamplingMode
from photon_trace.engine.device.sites import first_site
from photon_trace.engine.device.staging import SlotShape, SlotStaging

_DEVICE_DIR = os.path.dirname(os.path.abspath(__file__))

NUM_SLOTS = 2   # ping-pong: step t uses slot t % NUM_SLOTS; two are enough to overlap one step's
                # host work with the other's device work


class DeviceError(RuntimeError):
    """The device failed (CUDA error, worker process died): fatal to the engine."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSpec:
    """What the device needs to build its side: the model and the sizes of everything."""
    model: str             # preset name or checkpoint folder
    dtype: str             # "float32" | "bfloat16" | "float16"
    num_pages: int         # KV pool pages (page 0 is scratch)
    page_size: int         # tokens per page
    shape: SlotShape       # slot capacities
    table_rows: int        # sequences that can be resident at once (token-table rows)
    seed: int = 0          # preset weight seed
    cuda_graphs: bool = True
    threads: int = 1       # host-process device: intra-op threads (1: pinned to a core of its own)


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchShape:
    """A step's forward as the device sees it: host-known ints, never a device value."""
    num_tokens: int        # flat input tokens (prefill chunks + decode rows)
    num_rows: int          # rows (sequences) in the batch
    max_pages: int         # the widest row's page count (page-table columns to stage)
    max_query_len: int     # 1 for a pure decode step
    prefill: bool          # any prompt tokens in it (recorded as a prefill op)
    segments: tuple[Segment, ...] = ()  # a mixed batch's runs of rows (``batch.row_segments``)


class CompletedOp(NamedTuple):
    """One device op of a committed step, on the host clock."""
    stream: Stream
    op: DeviceOp
    t0: int
    t1: int
    enqueued: int          # when the device could first see it (the flush that carried it)
    runq_t0: int = -1      # the device's run-queue counter at t0 and t1 (ns its thread was runnable but
    runq_t1: int = -1      # not running, cumulative): the host-process worker's own; -1 on a GPU


def _in_device_layer(path: str) -> bool:
    return os.path.dirname(path) == _DEVICE_DIR


def call_site() -> str:
    """file:line of the first frame outside the device layer (who asked for the wait)."""
    return first_site(sys._getframe(2), _in_device_layer)


class Device:
    """Base: slot staging, op-timing bookkeeping and traced host waits."""

    backend = "?"
    num_slots = NUM_SLOTS
    anchor_error_ns = 0   # bound on the error of device times placed on the host clock
    concurrent_streams = True   # a copy runs beside compute (a GPU's copy engine); the trace header says so

    def __init__(self, spec: DeviceSpec, tracer: Tracer = NULL_TRACER) -> None:
        self.spec = spec
        self.tracer = tracer
        self.device_name = "?"
        # per slot: DeviceOp -> (stream, enqueued_ns); filled at enqueue, read at commit
        self._issued: list[dict[DeviceOp, tuple[Stream, int]]] = [{} for _ in range(NUM_SLOTS)]
        # per slot: whether this step's sampling computed log-probabilities (the copy-back brings them)
        self._logprobs = [False] * NUM_SLOTS

    # -- the operations (backends implement) ----------------------------------------------
    def staging(self, slot: int) -> SlotStaging:
        raise NotImplementedError

    def forward(self, slot: int, shape: LaunchShape) -> None:
        """Stage the slot's inputs and enqueue the forward (compute stream)."""
        raise NotImplementedError

    def sample(self, slot: int, lo: int, hi: int, *, masked: bool, mode: SamplingMode) -> None:
        """Sample rows [lo, hi) on the compute stream; masked rows read the uploaded bitmask."""
        raise NotImplementedError

    def upload_mask(self, slot: int, lo: int, hi: int) -> None:
        """Async: copy stream uploads staging.mask rows; the compute stream waits on it."""
        raise NotImplementedError

    def upload_mask_sync(self, slot: int, mask: np.ndarray, lo: int, hi: int, step: int) -> None:
        """The mask-upload bug: pageable memory, blocking copy; the host stalls until the device drains."""
        raise NotImplementedError

    def copy_back(self, slot: int, B: int) -> None:
        """Copy stream waits on this step's sampled event, then copies tokens to staging.out_tokens
        (and log-probabilities to staging.out_logprob/out_top_*, when the step's sampling made them)."""
        raise NotImplementedError

    def wait_copied(self, slot: int, step: int, *, expected: bool = False) -> None:
        """Wait for the step's tokens to land on the host (the slot's copy-back).

        The design expects this wait in one place: commit, for its own step; the engine
        says so there with ``expected=True``. The same wait anywhere else (a plan that
        reads the previous step's tokens early) serialises the pipeline, so it is
        recorded as an accidental sync at its call site."""
        reason = "commit: copy-back" if expected else "a step's tokens read outside its commit"
        self._traced_wait(self._copied_waiter(slot), reason, step, expected=expected)

    def _copied_waiter(self, slot: int):
        """A callable that blocks until the slot's latest copy-back has landed."""
        raise NotImplementedError

    def read_token_sync(self, row: int, step: int) -> int:
        """A host read of a device value (the ``.item()`` kind): drains the compute stream."""
        raise NotImplementedError

    def completed_ops(self, slot: int) -> list[CompletedOp]:
        """The slot's step's ops, on the host clock. Call after wait_copied."""
        raise NotImplementedError

    def anchor_clock(self) -> dict[str, int | str]:
        """While the device is idle (start of a run): place device times on the host clock
        afresh; returns the trace header's ``clock`` fields for it (``device_error_ns``:
        the bound on that placement). The host-process device stamps its events with the
        host's own monotonic clock, so there is nothing to place."""
        return {"device_clock": "host monotonic (the device process stamps it)", "device_error_ns": 0}

    def clock_drift(self) -> dict[str, int]:
        """While idle (end of a run): how far the device clock, through the anchor, has moved
        off the host's (``drift_ns``, within ``drift_error_ns``)."""
        return {"drift_ns": 0, "drift_error_ns": 0}

    def sync_debug(self) -> AbstractContextManager | None:
        """A context manager that records syncs hidden from the wait audit (CUDA's sync debug
        mode), or None where the backend has none to offer."""
        return None

    def flush(self) -> None:
        """Hand the commands issued since the last flush to the device.

        The engine flushes once per launch and per finalize, so a step's forward,
        sample and copy-back travel together; a wait flushes first. A no-op where
        each call already reaches the device (CUDA's launches).
        """

    def close(self) -> None:
        pass

    def check_alive(self) -> None:
        """Raise ``DeviceError`` if the device can run nothing more (its worker died). Cheap: for
        a caller with no step to run, to notice a dead device before the next request does."""

    # -- shared mechanics --------------------------------------------------------------
    def _issue(self, slot: int, op: DeviceOp, stream: Stream) -> None:
        self._issued[slot][op] = (stream, now_ns())

    def _begin_step(self, slot: int) -> None:
        self._issued[slot].clear()
        self._logprobs[slot] = False

    def _note_sample(self, slot: int, mode: SamplingMode) -> None:
        self._logprobs[slot] = self._logprobs[slot] or mode.logprobs

    def last_enqueue_ns(self) -> int:
        """When the newest op still on record was issued (0: none); bounds a sync's start."""
        return max((enq for issued in self._issued for _, enq in issued.values()), default=0)

    def _wait_working(self, ready, block) -> None:
        """Wait for the device (``ready()`` polls, ``block()`` waits), handing the tracer
        slices of its deferred work while the device is busy: time the host would spend
        blocked anyway, and a slice is short, so the wait ends at most a slice late."""
        work = self.tracer.work
        while not ready():
            if not work():
                block()
                return

    def _traced_wait(self, wait_fn, reason: str, step: int, *, expected: bool) -> None:
        t0 = self.tracer.begin_wait()   # where the wait starts: the tracer notes whether the host runs
        wait_fn()
        self.tracer.host_wait(reason, expected, t0, now_ns(), call_site(), step)
