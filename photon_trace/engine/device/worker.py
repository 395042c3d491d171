"""The host-process device: a worker process that plays the GPU.

It owns the "device memory" (weights, KV pages, token table, slot buffers) and
executes each stream's commands in order with one intra-op thread, so on a
2-core machine the device and the scheduler each get a core. Streams are
in-order queues; a WAIT blocks its stream until the event has been recorded,
and the worker always runs the oldest runnable command, as a GPU's stream
scheduler would.
"""
from __future__ import annotations

import os
import pickle
import sys
import time
import traceback
from collections import deque
from multiprocessing.connection import Connection

import numpy as np
import torch

from photon_trace.telemetry.tracer import DeviceOp
import photon_trace.engine.device.commands as P
import photon_trace.engine.device.shm as _shm
from photon_trace.engine.device.program import DeviceProgram, build_program
from photon_trace.engine.device.ring import ON_SOCKET, CommandRing, empty_bell, sleep_on_bell
from photon_trace.engine.device.staging import SlotStaging
from photon_trace.engine.device.wire import FromWire

BLOCK = "block"   # a slot's whole staging block, beside its per-field views


def worker_main(conn: Connection, bell: int) -> int:
    """Serve one device until the host's STOP (or its going); the exit code.

    ``conn`` and the doorbell's read end ``bell`` were handed over at start: by the
    command line (a fresh interpreter) or by the zygote (``zygote.py``). The rest comes
    in the first message, so a worker forked before its engine existed serves it.
    """
    try:
        spec, cpu, cpus, state_path, staging_paths, ring_path = conn.recv()
    except (EOFError, OSError):
        return 1   # the host went before it sent the device's description
    torch.set_num_threads(spec.threads)
    _pin(cpu, cpus)
    state = P.SharedState(2, path=state_path)
    try:
        ring = CommandRing(path=ring_path)
        os.set_blocking(bell, False)
        host = []
        for path in staging_paths:
            st = SlotStaging(spec.shape, _shm.attach(path))
            views = {name: torch.from_numpy(getattr(st, name)) for name in st.names}
            host.append({**views, BLOCK: torch.from_numpy(st.block)})
        with torch.inference_mode():
            program = build_program(spec, torch.device("cpu"))
            state.ready[0] = 1
            _run(_Queue(conn, ring, bell, state.sent, P.WORKER_SPIN_NS if cpu >= 0 else 0), conn, program, state,
                 host)
        return 0
    except BaseException as e:  # report anything, including a model error, then die
        state.error[0] = 1
        # The exception itself goes too when it is the user's to read (a checkpoint that cannot
        # load names its file and tensor): the host raises it as is, not a worker traceback.
        user_error = e if _is_user_error(e) else None
        try:
            conn.send(("error", traceback.format_exc(), user_error))
        except (BrokenPipeError, OSError):
            pass
        return 1


def _is_user_error(e: BaseException) -> bool:
    from photon_trace.engine.model.checkpoint import CheckpointError

    return isinstance(e, (CheckpointError, ValueError))


def _pin(cpu: int, cpus: list[int]) -> None:
    """Run on the CPU the host chose (the last one), as a GPU is its own chip.

    Without pinning the OS migrates the two busy processes between cores and the
    device's step time wanders by ~10% from run to run on a 2-core machine. Unpinned
    (``cpu`` -1), on every CPU the host's process had before an engine narrowed its
    threads: a worker, or the zygote that forked it, started from a narrowed thread
    would otherwise share the host's cores only.
    """
    if not hasattr(os, "sched_setaffinity"):
        return
    if cpu >= 0:
        os.sched_setaffinity(0, {cpu})
    elif cpus:
        os.sched_setaffinity(0, set(cpus))


class _Queue:
    """The host's batches, in order: from the ring, or the socket where the ring says so."""

    def __init__(self, conn: Connection, ring: CommandRing, bell: int, sent, spin_ns: int) -> None:
        self.conn, self.ring, self.bell, self.sent, self.spin_ns = conn, ring, bell, sent, spin_ns

    def next(self, taken: int):
        """The next batch, the ``taken``-th having been the last: watch the host's batch counter
        for ``spin_ns``, then sleep until the doorbell rings; a STOP when the host has gone.

        A GPU's front end polls its queues; here polling keeps the OS wake-up (~0.1-0.3 ms on
        a VM whose idle vCPU was descheduled) out of the common case where the host's next
        launch follows within a few hundred microseconds, as in blocking mode. It polls a
        counter in shared memory, not a file descriptor: a syscall right after a forward, with
        cold caches, costs ~35 us. Spinning costs nothing the host needs: this process has its
        core to itself (``spin_ns`` is 0 when it does not).
        """
        sent = self.sent
        if self.spin_ns and sent[0] <= taken:
            until = time.monotonic_ns() + self.spin_ns
            while sent[0] <= taken:
                if time.monotonic_ns() > until:
                    break
        while sent[0] <= taken:
            if not empty_bell(self.bell):
                return (P.CONTROL, P.STOP)
            if sent[0] > taken:
                break
            sleep_on_bell(self.bell)
        record = self.ring.get()
        msg = self.conn.recv() if len(record) == ON_SOCKET else pickle.loads(record)
        record.release()
        self.ring.advance()
        return msg


def runq_clock():
    """The calling thread's run-queue counter (ns it was runnable but not running, cumulative),
    read from its schedstat file kept open: ~1 us. A dispatch gap the worker spent waiting for a
    CPU is the machine's doing, not the host's nor the device's (``analysis/device_running.py``).
    Where the file is missing: -1, not measured."""
    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        int(os.pread(fd, 64, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return lambda: -1
    return lambda: int(os.pread(fd, 64, 0).split()[1])


def _run(queue: _Queue, conn: Connection, program: DeviceProgram, state: P.SharedState, host: list[dict]) -> None:
    streams = (deque(), deque())  # compute, copy: (arrival index, command)
    arrived = batches = 0
    timed: list[tuple] = []   # (slot, op, t0, t1, runq at t0, runq at t1) not yet in shared memory
    runq = runq_clock()
    ev_gen, ev_time, op_times, waiter = state.ev_gen, state.ev_time, state.op_times, state.waiter
    from_wire = FromWire()

    def runnable(cmd) -> bool:
        return cmd[1] != P.WAIT or ev_gen[cmd[2]] >= cmd[3]

    def take(msg) -> bool:
        """Queue a message's commands (a list: one flush's batch); False on STOP."""
        nonlocal arrived, batches
        if isinstance(msg, tuple):  # control
            return msg[1] != P.STOP
        batches += 1
        for cmd in msg:
            streams[cmd[0]].append((arrived, cmd))
            arrived += 1
        return True

    while True:
        # Take the host's next batch only when nothing taken can run: anything still in the
        # ring arrived later than everything taken, so the oldest runnable command is here,
        # and each read right after a long op runs with cold caches (the weights just
        # streamed through them) on the device's critical path.
        heads = [q[0] for q in streams if q and runnable(q[0][1])]
        if not heads:
            if not take(queue.next(batches)):
                return
            continue
        _, cmd = min(heads)
        streams[cmd[0]].popleft()
        op = cmd[1]
        if op == P.STAGE_FORWARD:
            _, _, slot, wire, fop = cmd
            shape = from_wire.shape(wire)
            q0, t0 = runq(), time.monotonic_ns()
            program.stage(slot, host[slot][BLOCK], shape.num_rows)
            t1, q1 = time.monotonic_ns(), runq()
            program.forward(slot, shape)
            t2 = time.monotonic_ns()
            timed += ((slot, DeviceOp.STAGE, t0, t1, q0, q1), (slot, fop, t1, t2, q1, runq()))
        elif op == P.SAMPLE:
            _, _, slot, lo, hi, masked, wire, sop = cmd
            mode = from_wire.mode(wire)
            q0, t0 = runq(), time.monotonic_ns()
            program.sample(slot, lo, hi, masked=masked, mode=mode)
            timed.append((slot, sop, t0, time.monotonic_ns(), q0, runq()))
        elif op == P.UPLOAD_MASK:
            _, _, slot, lo, hi = cmd
            q0, t0 = runq(), time.monotonic_ns()
            program.upload_mask(slot, host[slot]["mask"], lo, hi)
            timed.append((slot, DeviceOp.MASK_UPLOAD, t0, time.monotonic_ns(), q0, runq()))
        elif op == P.UPLOAD_MASK_INLINE:
            _, _, slot, lo, hi, data = cmd
            q0, t0 = runq(), time.monotonic_ns()
            words = program.shape.mask_words
            mask = torch.from_numpy(np.frombuffer(bytearray(data), dtype=np.int32).reshape(hi - lo, words))
            program.slots[slot].mask[lo:hi].copy_(mask)
            timed.append((slot, DeviceOp.MASK_UPLOAD, t0, time.monotonic_ns(), q0, runq()))
        elif op == P.COPY_BACK:
            _, _, slot, B, logprobs = cmd
            q0, t0 = runq(), time.monotonic_ns()
            program.copy_back(slot, host[slot], B, logprobs)
            timed.append((slot, DeviceOp.COPY_BACK, t0, time.monotonic_ns(), q0, runq()))
        elif op == P.RECORD:
            # Op times reach shared memory here, before any event the host could wait
            # on: writing them right after a forward costs ~25 us with cold caches,
            # on the device's critical path.
            for slot, dop, *times in timed:
                op_times[slot, dop] = times
            timed.clear()
            # timestamp before generation: a reader that sees the generation sees the time
            ev_time[cmd[2]] = time.monotonic_ns()
            ev_gen[cmd[2]] = cmd[3]
            if waiter[0] == cmd[2] and cmd[3] >= waiter[1]:
                conn.send(P.WAKE)  # the host sleeps on this event: wake it
        elif op == P.READ_TABLE:
            state.scalar[0] = int(program.read_table(cmd[2]))
        # WAIT: satisfied, nothing to do


def leave(code: int) -> None:
    """End the worker's process now: torch's interpreter teardown took ~0.7 s of every
    engine's close, and there is nothing to save (the host unlinks the shared memory)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


if __name__ == "__main__":   # a fresh interpreter (PHOTON_TRACE_FRESH_WORKER): conn's fd, the bell's
    leave(worker_main(Connection(int(sys.argv[1])), int(sys.argv[2])))
