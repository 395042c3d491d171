"""The device interface the scheduler drives; both backends implement it.

Device work is a small set of named operations on a slot. Every host wait goes
through ``_host_wait`` with a reason and whether the design expects it, so the
tracer can tell the commit's expected wait from an accidental synchronisation,
and name the line of code that caused it.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

from photon_trace.telemetry.tracer import NULL_TRACER, DeviceOp, Stream, Tracer, now_ns
from photon_trace.engine.device.staging import SlotShape, SlotStaging

_DEVICE_DIR = os.path.dirname(os.path.abspath(__file__))


class DeviceError(RuntimeError):
    """The device failed (CUDA error, worker process died): fatal to the engine."""


@dataclass(frozen=True, slots=True)
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


def call_site() -> str:
    """file:line of the first frame outside the device layer (who asked for the wait)."""
    frame = sys._getframe(2)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _DEVICE_DIR:
        frame = frame.f_back
    if frame is None:
        return "?"
    path = frame.f_code.co_filename
    rel = path.split("photon_trace" + os.sep, 1)[-1] if "photon_trace" + os.sep in path else os.path.basename(path)
    return f"{rel}:{frame.f_lineno}"


class Device:
    """Base: slot staging, op-timing bookkeeping and traced host waits."""

    backend = "?"
    num_slots = 2

    def __init__(self, spec: DeviceSpec, tracer: Tracer = NULL_TRACER) -> None:
        self.spec = spec
        self.tracer = tracer
        self.device_name = "?"
        # per slot: DeviceOp -> (stream, enqueued_ns); filled at enqueue, read at commit
        self._issued: list[dict[DeviceOp, tuple[Stream, int]]] = [{} for _ in range(self.num_slots)]

    # -- the operations (backends implement) ----------------------------------------------
    def staging(self, slot: int) -> SlotStaging:
        raise NotImplementedError

    def forward(self, slot: int, T: int, B: int, P: int, max_q: int, prefill: bool,
                segments: tuple = ()) -> None:
        """Stage the slot's inputs and enqueue the forward (compute stream); ``segments``:
        a mixed batch's runs of rows (``batch.row_segments``), host-known ints."""
        raise NotImplementedError

    def sample(self, slot: int, lo: int, hi: int, masked: bool, mode: int) -> None:
        """Sample rows [lo, hi) on the compute stream; masked rows read the uploaded bitmask."""
        raise NotImplementedError

    def upload_mask(self, slot: int, lo: int, hi: int) -> None:
        """Async: copy stream uploads staging.mask rows; the compute stream waits on it."""
        raise NotImplementedError

    def upload_mask_sync(self, slot: int, mask: np.ndarray, lo: int, hi: int, step: int) -> None:
        """The mask-upload bug: pageable memory, blocking copy; the host stalls until the device drains."""
        raise NotImplementedError

    def copy_back(self, slot: int, B: int) -> None:
        """Copy stream waits on this step's sampled event, then copies tokens to staging.out_tokens."""
        raise NotImplementedError

    def wait_copied(self, slot: int, step: int) -> None:
        """The commit's expected wait for the step's tokens to land on the host."""
        raise NotImplementedError

    def read_token_sync(self, row: int, step: int) -> int:
        """A host read of a device value (the ``.item()`` kind): drains the compute stream."""
        raise NotImplementedError

    def completed_ops(self, slot: int) -> list[tuple[Stream, DeviceOp, int, int, int]]:
        """(stream, op, t0, t1, enqueued) of the slot's step, on the host clock. Call after wait_copied."""
        raise NotImplementedError

    def flush(self) -> None:
        """Hand the commands issued since the last flush to the device.

        The engine flushes once per launch and per finalize, so a step's forward,
        sample and copy-back travel together; a wait flushes first. A no-op where
        each call already reaches the device (CUDA's launches).
        """

    def close(self) -> None:
        pass

    # -- shared mechanics --------------------------------------------------------------
    def _issue(self, slot: int, op: DeviceOp, stream: Stream) -> None:
        self._issued[slot][op] = (stream, now_ns())

    def _begin_step(self, slot: int) -> None:
        self._issued[slot].clear()

    def _traced_wait(self, wait_fn, reason: str, expected: bool, step: int) -> None:
        t0 = now_ns()
        wait_fn()
        if self.tracer.level:
            self.tracer.host_wait(reason, expected, t0, now_ns(), call_site(), step)
