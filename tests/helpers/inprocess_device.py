"""An in-process stand-in for the host-process device (``cpu`` backend), for tests that
check the engine's bookkeeping over many workloads.

It runs the worker's own device program (``engine/device/program.py``: model, KV pool,
token table, penalties, sampling, copy-back) on the caller's thread, so its tokens and
log-probabilities are the worker's: the same ops, one intra-op thread (the suite's),
``inference_mode``. Commands are collected as the worker receives them and run at the
flush that would have sent them (a wait flushes first), in the order they were issued:
an order the worker's streams may run them in, since every stream wait is issued after
the record it waits for.

What it cannot show, and the tests that keep the real worker must: the command ring,
the shared memory, the worker process and its failures, the host and the device
overlapping (every wait finds its event recorded), and any timing. Starting one costs
no process and no second ``import torch``: the cost unit of the engine tests.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

import photon_trace.engine.engine as engine_module
from photon_trace.engine.device.base import CompletedOp, Device, DeviceSpec, LaunchShape
from photon_trace.engine.device.program import build_program
from photon_trace.engine.device.sampling import SamplingMode
from photon_trace.engine.device.staging import SlotStaging
from photon_trace.engine.engine import Engine
from photon_trace.telemetry.tracer import NULL_TRACER, DeviceOp, Stream, Tracer, now_ns

from helpers.engine_helpers import tiny_engine

DEVICE_NAME = "in-process device double"


class InProcessDevice(Device):
    """The ``cpu`` backend's device program behind the device interface, without a worker."""

    backend = "cpu"
    concurrent_streams = False   # as the worker: one executor runs every stream's commands

    def __init__(self, spec: DeviceSpec, tracer: Tracer = NULL_TRACER) -> None:
        super().__init__(spec, tracer)
        self._staging = [SlotStaging(spec.shape, bytearray(spec.shape.nbytes())) for _ in range(self.num_slots)]
        # the worker's tensor views of each slot's staging block (worker.py builds the same)
        self._host = [{**{name: torch.from_numpy(getattr(st, name)) for name in st.names},
                       "block": torch.from_numpy(st.block)} for st in self._staging]
        with torch.inference_mode():
            self.program = build_program(spec, torch.device("cpu"))
        self._queued: list[tuple[int, DeviceOp | None, Callable[[], None]]] = []   # (slot, timed op, run)
        self._unsent: list[tuple[int, DeviceOp, Stream]] = []
        self._times: list[dict[DeviceOp, tuple[int, int]]] = [{} for _ in range(self.num_slots)]
        self._scalar = 0
        self.device_name = DEVICE_NAME

    # -- plumbing: a flush runs what the worker would have been sent ----------------------
    def _issue(self, slot: int, op: DeviceOp, stream: Stream) -> None:
        super()._issue(slot, op, stream)
        self._unsent.append((slot, op, stream))

    def _queue(self, slot: int, op: DeviceOp | None, run: Callable[[], None]) -> None:
        self._queued.append((slot, op, run))

    def flush(self) -> None:
        if self._unsent:   # enqueued when the device can first see them, as the host-process device says
            t = now_ns()
            for slot, op, stream in self._unsent:
                self._issued[slot][op] = (stream, t)
            self._unsent.clear()
        queued, self._queued = self._queued, []
        with torch.inference_mode():
            for slot, op, run in queued:
                t0 = now_ns()
                run()
                if op is not None:
                    self._times[slot][op] = (t0, now_ns())

    # -- the operations -------------------------------------------------------------------
    def staging(self, slot: int) -> SlotStaging:
        return self._staging[slot]

    def forward(self, slot: int, shape: LaunchShape) -> None:
        self._begin_step(slot)
        op = DeviceOp.PREFILL if shape.prefill else DeviceOp.FORWARD
        self._issue(slot, DeviceOp.STAGE, Stream.COMPUTE)
        self._issue(slot, op, Stream.COMPUTE)
        self._queue(slot, DeviceOp.STAGE, lambda: self.program.stage(slot, self._host[slot]["block"], shape.num_rows))
        self._queue(slot, op, lambda: self.program.forward(slot, shape))

    def sample(self, slot: int, lo: int, hi: int, *, masked: bool, mode: SamplingMode) -> None:
        op = DeviceOp.MASKED_SAMPLE if masked else DeviceOp.SAMPLE
        self._note_sample(slot, mode)
        self._issue(slot, op, Stream.COMPUTE)
        self._queue(slot, op, lambda: self.program.sample(slot, lo, hi, masked=masked, mode=mode))

    def upload_mask(self, slot: int, lo: int, hi: int) -> None:
        self._issue(slot, DeviceOp.MASK_UPLOAD, Stream.COPY)
        self._queue(slot, DeviceOp.MASK_UPLOAD,
                    lambda: self.program.upload_mask(slot, self._host[slot]["mask"], lo, hi))

    def upload_mask_sync(self, slot: int, mask: np.ndarray, lo: int, hi: int, step: int) -> None:
        # as the worker's inline upload: the rows as they are now, behind the compute stream
        rows = torch.from_numpy(mask[lo:hi].copy())
        self._issue(slot, DeviceOp.MASK_UPLOAD, Stream.COMPUTE)
        self._queue(slot, DeviceOp.MASK_UPLOAD, lambda: self.program.slots[slot].mask[lo:hi].copy_(rows))
        self._traced_wait(self.flush, "mask upload: pageable copy waits for the device to drain", step, expected=False)

    def copy_back(self, slot: int, B: int) -> None:
        logprobs = self._logprobs[slot]   # whether this step's sampling made them, as issued
        self._issue(slot, DeviceOp.COPY_BACK, Stream.COPY)
        self._queue(slot, DeviceOp.COPY_BACK, lambda: self.program.copy_back(slot, self._host[slot], B, logprobs))

    def _copied_waiter(self, slot: int):
        return self.flush

    def read_token_sync(self, row: int, step: int) -> int:
        def read() -> None:
            self._scalar = int(self.program.read_table(row))
        self._queue(-1, None, read)
        self._traced_wait(self.flush, "host read of a device value", step, expected=False)
        return self._scalar

    def completed_ops(self, slot: int) -> list[CompletedOp]:
        times = self._times[slot]
        return [CompletedOp(stream, op, *times[op], enq) for op, (stream, enq) in self._issued[slot].items()]

    def close(self) -> None:
        self._queued.clear()
        self._staging, self._host = [], []


@contextmanager
def devices_in_process() -> Iterator[None]:
    """Engines made in the block get an ``InProcessDevice`` where they would start a worker."""
    original = engine_module.make_device

    def make(backend: str, spec: DeviceSpec, tracer: Tracer = NULL_TRACER) -> Device:
        assert backend == "cpu", f"the in-process device stands in for the cpu backend, not {backend!r}"
        return InProcessDevice(spec, tracer)

    engine_module.make_device = make
    try:
        yield
    finally:
        engine_module.make_device = original


def in_process_engine(depth: int, **overrides) -> Engine:
    """``tiny_engine(depth, **overrides)`` on an ``InProcessDevice``."""
    with devices_in_process():
        return tiny_engine(depth, **overrides)
