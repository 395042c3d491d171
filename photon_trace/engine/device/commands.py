"""Commands between the host and the host-process device, and its shared state.

A command is a small tuple ``(stream, opcode, *args)``; a flush puts the
commands issued since the last one, as one pickled list, in the command ring
(``ring.py``): this backend's kernel launch. Events, op timings and the count of batches sent
live in shared memory, so reading them costs neither side a syscall.
"""
from __future__ import annotations

import numpy as np

import photon_trace.engine.device.shm as _shm

# opcodes
STAGE_FORWARD = 1   # slot, LaunchShape (its wire tuple, ``wire``), op
SAMPLE = 2          # slot, lo, hi, masked, SamplingMode (its wire tuple), op
UPLOAD_MASK = 3     # slot, lo, hi
UPLOAD_MASK_INLINE = 4  # slot, lo, hi, mask bytes (the pageable-copy bug)
COPY_BACK = 5       # slot, B, logprobs
RECORD = 6          # event, generation
WAIT = 7            # event, generation: the stream waits until the event reaches it
READ_TABLE = 8      # row: copy one token-table entry into the shared scalar
STOP = 9

WAKE = ("wake",)  # worker -> host: the event the host sleeps on was recorded
CONTROL = -1        # not a stream: taken as soon as the worker reads it

WORKER_SPIN_NS = 2_000_000  # an idle worker polls this long before sleeping in the kernel

# events per slot, then the global ones
EV_SAMPLED, EV_COPIED, EV_MASK = 0, 1, 2
EVENTS_PER_SLOT = 3
EV_DRAIN, EV_READ = 0, 1  # offsets after the slots' events
N_OPS = 8                 # DeviceOp values fit below this
OP_FIELDS = 4             # per op: t0, t1, and the worker's run-queue counter at each


class SharedState:
    """Event generations/timestamps, op timings, an error flag and a scalar mailbox."""

    def __init__(self, num_slots: int, path: str | None = None) -> None:
        self.num_events = num_slots * EVENTS_PER_SLOT + 2
        self.num_slots = num_slots
        n = 8 * (2 * self.num_events + num_slots * N_OPS * OP_FIELDS + 6)
        if path is None:
            self.path, self._map = _shm.create(n)
        else:
            self.path, self._map = path, _shm.attach(path)
        buf = np.frombuffer(self._map, dtype=np.int64, count=n // 8)
        e = self.num_events
        self.ev_gen = buf[:e]
        self.ev_time = buf[e:2 * e]
        self.op_times = buf[2 * e:2 * e + num_slots * N_OPS * OP_FIELDS].reshape(num_slots, N_OPS, OP_FIELDS)
        tail = buf[2 * e + num_slots * N_OPS * OP_FIELDS:]
        self.error = tail[0:1]   # non-zero once the worker failed
        self.scalar = tail[1:2]  # READ_TABLE result
        self.ready = tail[2:3]   # worker finished start-up
        self.waiter = tail[3:5]  # (event, generation) the host sleeps on; event -1: none
        self.sent = tail[5:6]    # command batches the host has put in the ring (the worker polls it)
        if path is None:
            self.waiter[0] = -1

    def slot_event(self, slot: int, kind: int) -> int:
        return slot * EVENTS_PER_SLOT + kind

    def global_event(self, offset: int) -> int:
        return self.num_slots * EVENTS_PER_SLOT + offset

    def unlink(self) -> None:
        _shm.unlink(self.path)
