"""Host side of the host-process device (``cpu`` backend).

Slot staging buffers are shared memory mapped into both processes (the
stand-in for pinned memory a DMA engine reads). Commands collect on the host
and each flush (a launch or a finalize: the step's forward, sample and
copy-back together) puts them in the command ring (``ring.py``) and rings
the worker's doorbell: this backend's kernel launch.
Waiting for an event spins on a shared generation counter, checking that the
worker is alive, so a dead device is a clear error and never a hang.
"""
from __future__ import annotations

import os
import pickle
import socket
import subprocess
import threading
import time
import weakref
from multiprocessing.connection import Connection

import numpy as np

from photon_trace.telemetry.tracer import NULL_TRACER, DeviceOp, Stream, Tracer, now_ns
import photon_trace.engine.device.commands as P
import photon_trace.engine.device.shm as _shm
from photon_trace.engine.device.base import CompletedOp, Device, DeviceError, DeviceSpec, LaunchShape
from photon_trace.engine.device.ring import CommandRing, Doorbell
from photon_trace.engine.device.sampling import SamplingMode
from photon_trace.engine.device.spawn import WorkerProcess, start_worker
from photon_trace.engine.device.staging import SlotStaging
from photon_trace.engine.device.wire import mode_to_wire, shape_to_wire

_SPIN_NS = 50_000           # a wait first spins this long without yielding
_YIELD_SPIN_NS = 1_000_000_000  # then, with a core to itself, spins yielding this long before sleeping
_LIVENESS_S = 0.1           # how often a long wait checks the worker is alive
_LIVENESS_NS = int(_LIVENESS_S * 1e9)
_START_TIMEOUT_S = 600.0
_STOP_GRACE_S = 5.0         # a worker that has not left this long after STOP is killed


class HostProcessDevice(Device):
    backend = "cpu"
    concurrent_streams = False   # one worker runs every stream's commands, one at a time

    def __init__(self, spec: DeviceSpec, tracer: Tracer = NULL_TRACER) -> None:
        super().__init__(spec, tracer)
        self.state = P.SharedState(self.num_slots)
        maps = [_shm.create(spec.shape.nbytes()) for _ in range(self.num_slots)]
        self._ring, self._bell = CommandRing(), Doorbell()
        self._paths = [self.state.path, self._ring.path] + [path for path, _ in maps]
        self._staging = [SlotStaging(spec.shape, m) for _, m in maps]
        self._gen = [0] * self.state.num_events
        self._batch: list[tuple] = []
        self._unsent: list[tuple[int, DeviceOp, Stream]] = []   # issued, not yet flushed
        self._sent = self.state.sent
        # Never a fork of this process: no inherited threads, locks or OpenMP state, and no
        # re-import of the caller's main module (spawn.py: a zygote's child or a fresh interpreter).
        cpu = _device_cpu() if spec.threads == 1 else -1   # more threads: the OS places them
        ours, theirs = socket.socketpair()
        try:
            self._proc = start_worker(theirs.fileno(), self._bell.read_fd, time.monotonic() + _START_TIMEOUT_S)
        except BaseException:
            for f in (ours, theirs):
                f.close()
            self._bell.close()
            self._ring.close()
            for path in self._paths:
                _shm.unlink(path)
            raise
        theirs.close()
        self._bell.handed_over()
        self._conn = Connection(ours.detach())
        self._closed = False
        self._pinned: list[int] = []   # the host thread _keep_host_off narrowed, once it has
        self._finalizer = weakref.finalize(self, _cleanup, self._proc, self._conn, self._ring, self._bell, self._sent,
                                           self._paths, self._pinned)
        try:
            self._send_description(spec, cpu, [path for path, _ in maps])
            deadline = time.monotonic() + _START_TIMEOUT_S
            while not self.state.ready[0]:
                self._check_alive()
                if time.monotonic() > deadline:
                    raise DeviceError("the device worker did not start in time")
                time.sleep(0.005)
        except BaseException:
            self.close()   # the worker is gone or going: stop it, unlink the shared memory, then report
            raise
        threads = "1 intra-op thread" if spec.threads == 1 else f"{spec.threads} intra-op threads"
        self.device_name = f"host process (pid {self._proc.pid}, {threads})"
        if _keep_host_off(cpu):
            self._pinned.append(threading.get_native_id())
        self._yield_spin_ns = _YIELD_SPIN_NS if cpu >= 0 else 0

    def _send_description(self, spec: DeviceSpec, cpu: int, staging_paths: list[str]) -> None:
        """The worker's first message; one that died before it could read it is reported as
        dead with its exit code (its end closed: it has gone or is going)."""
        try:
            self._conn.send((spec, cpu, _CPUS, self.state.path, staging_paths, self._ring.path))
        except OSError as e:
            try:
                self._proc.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            self._check_alive()
            raise DeviceError(f"the device worker is unreachable: {e}") from e

    # -- plumbing ------------------------------------------------------------------------
    def _send(self, cmd: tuple) -> None:
        self._batch.append(cmd)

    def _issue(self, slot: int, op: DeviceOp, stream: Stream) -> None:
        super()._issue(slot, op, stream)
        self._unsent.append((slot, op, stream))

    def flush(self) -> None:
        self._flush()

    def _flush(self) -> None:
        """One ring record carries every command issued since the last flush (a launch).

        Their ops count as enqueued now, when the device can first see them: the
        analysis blames a gap on the host when the next op was enqueued late.
        """
        if not self._batch:
            return
        if self._closed:
            raise DeviceError("the device is closed")
        batch, self._batch = self._batch, []
        if self._unsent:
            t = now_ns()
            for slot, op, stream in self._unsent:
                self._issued[slot][op] = (stream, t)
            self._unsent.clear()
        data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            if not self._ring.fits(len(data)):
                self._conn.send_bytes(data)   # too big for the ring: the socket carries it, the ring says so
                data = b""
            while not self._ring.put(data):   # the worker is a ring behind: wait for it to take some
                self._check_alive()
                os.sched_yield()
            self._sent[0] += 1   # after the put: a worker that sees the count finds the batch there
            self._bell.ring()
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            self._check_alive()
            raise DeviceError(f"the device worker is unreachable: {e}") from e

    def _record(self, event: int, stream: Stream) -> int:
        self._gen[event] += 1
        self._send((int(stream), P.RECORD, event, self._gen[event]))
        return self._gen[event]

    def _stream_wait(self, stream: Stream, event: int, gen: int) -> None:
        self._send((int(stream), P.WAIT, event, gen))

    def check_alive(self) -> None:
        self._check_alive()

    def _check_alive(self) -> None:
        if self.state.error[0]:
            msg = "unknown error"
            try:
                while self._conn.poll(1.0):
                    reply = self._conn.recv()
                    if reply[0] == "error":
                        self._raise_worker_error(reply)
            except (EOFError, OSError):
                pass
            raise DeviceError(f"the device worker failed:\n{msg}")
        if self._proc.poll() is not None:
            raise DeviceError(f"the device worker died (exit code {self._proc.returncode})")

    @staticmethod
    def _raise_worker_error(reply: tuple) -> None:
        """The worker's error: its own exception when it is the user's (a bad checkpoint,
        a bad value), else a DeviceError carrying the worker's traceback."""
        _, trace, user_error = (*reply, None)[:3]
        if user_error is not None:
            raise user_error
        raise DeviceError(f"the device worker failed:\n{trace}")

    def _wait_event(self, event: int, gen: int) -> None:
        """Spin, then sleep until the worker wakes us.

        As CUDA's default schedule does, the host spins while it has a core to
        itself: waking a sleeping process costs ~0.3 ms on a VM (the idle vCPU is
        descheduled), paid once by the host and once more by the worker, which
        sends the wake-up message on the device's critical path. Past the first
        spin the wait hands the tracer slices of its deferred work (``work()``:
        conversion, encoding) and, when it has none, yields each turn, so other host
        threads (a server's event loop) still run; it checks the worker is alive.
        Without a core of its own (unpinned, one CPU), the host spins only briefly
        and then sleeps.
        """
        self._flush()
        ev_gen = self.state.ev_gen
        if ev_gen[event] >= gen:
            return
        t = time.monotonic_ns()
        spin_until, yield_until = t + _SPIN_NS, t + self._yield_spin_ns
        check_at = t + _LIVENESS_NS
        work = self.tracer.work
        while ev_gen[event] < gen:
            t = time.monotonic_ns()
            if t > spin_until:
                if work():
                    pass           # a slice of the tracer's work: the event is checked between slices
                elif t > yield_until:
                    break
                else:
                    os.sched_yield()   # releases the GIL
                if t > check_at:
                    self._check_alive()
                    check_at = t + _LIVENESS_NS
        else:
            return
        waiter = self.state.waiter
        waiter[1] = gen
        waiter[0] = event
        try:
            while ev_gen[event] < gen:  # re-checked after publishing the waiter: no lost wake-up
                try:
                    reply = self._conn.recv() if self._conn.poll(_LIVENESS_S) else None
                except (EOFError, OSError) as e:
                    self._check_alive()
                    raise DeviceError(f"the device worker is unreachable: {e}") from e
                if reply is None:
                    self._check_alive()
                elif reply[0] == "error":
                    self._raise_worker_error(reply)
        finally:
            waiter[0] = -1

    # -- the operations -------------------------------------------------------------------
    def staging(self, slot: int) -> SlotStaging:
        return self._staging[slot]

    def forward(self, slot: int, shape: LaunchShape) -> None:
        self._begin_step(slot)
        op = DeviceOp.PREFILL if shape.prefill else DeviceOp.FORWARD
        self._issue(slot, DeviceOp.STAGE, Stream.COMPUTE)
        self._issue(slot, op, Stream.COMPUTE)
        self._send((int(Stream.COMPUTE), P.STAGE_FORWARD, slot, shape_to_wire(shape), int(op)))

    def sample(self, slot: int, lo: int, hi: int, *, masked: bool, mode: SamplingMode) -> None:
        op = DeviceOp.MASKED_SAMPLE if masked else DeviceOp.SAMPLE
        self._note_sample(slot, mode)
        self._issue(slot, op, Stream.COMPUTE)
        self._send((int(Stream.COMPUTE), P.SAMPLE, slot, lo, hi, masked, mode_to_wire(mode), int(op)))

    def upload_mask(self, slot: int, lo: int, hi: int) -> None:
        self._issue(slot, DeviceOp.MASK_UPLOAD, Stream.COPY)
        self._send((int(Stream.COPY), P.UPLOAD_MASK, slot, lo, hi))
        ev = self.state.slot_event(slot, P.EV_MASK)
        self._stream_wait(Stream.COMPUTE, ev, self._record(ev, Stream.COPY))

    def upload_mask_sync(self, slot: int, mask: np.ndarray, lo: int, hi: int, step: int) -> None:
        # The bug, faithfully: an ordinary copy from pageable memory is ordered
        # behind everything on the compute stream and the host blocks until it
        # is done, i.e. until the device has drained.
        self._issue(slot, DeviceOp.MASK_UPLOAD, Stream.COMPUTE)
        self._send((int(Stream.COMPUTE), P.UPLOAD_MASK_INLINE, slot, lo, hi, mask[lo:hi].tobytes()))
        ev = self.state.global_event(P.EV_DRAIN)
        gen = self._record(ev, Stream.COMPUTE)
        self._traced_wait(lambda: self._wait_event(ev, gen),
                          "mask upload: pageable copy waits for the device to drain", step, expected=False)

    def copy_back(self, slot: int, B: int) -> None:
        sampled = self.state.slot_event(slot, P.EV_SAMPLED)
        self._stream_wait(Stream.COPY, sampled, self._record(sampled, Stream.COMPUTE))
        self._issue(slot, DeviceOp.COPY_BACK, Stream.COPY)
        self._send((int(Stream.COPY), P.COPY_BACK, slot, B, self._logprobs[slot]))
        copied = self.state.slot_event(slot, P.EV_COPIED)
        self._record(copied, Stream.COPY)

    def _copied_waiter(self, slot: int):
        ev = self.state.slot_event(slot, P.EV_COPIED)
        gen = self._gen[ev]
        return lambda: self._wait_event(ev, gen)

    def read_token_sync(self, row: int, step: int) -> int:
        self._send((int(Stream.COMPUTE), P.READ_TABLE, row))
        ev = self.state.global_event(P.EV_READ)
        gen = self._record(ev, Stream.COMPUTE)
        self._traced_wait(lambda: self._wait_event(ev, gen), "host read of a device value", step,
                          expected=False)
        return int(self.state.scalar[0])

    def completed_ops(self, slot: int) -> list[CompletedOp]:
        times = self.state.op_times[slot]
        return [CompletedOp(stream, op, *map(int, times[op, :2]), enq, *map(int, times[op, 2:]))
                for op, (stream, enq) in self._issued[slot].items()]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._staging = []
            self._finalizer()


# The CPUs this process could use before any engine narrowed them: every engine's
# device worker goes on the last one, the host's threads keep the rest.
_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _device_cpu() -> int:
    if os.environ.get("PHOTON_TRACE_NO_PIN") or len(_CPUS) < 2:
        return -1
    return _CPUS[-1]


_pin_count: dict[int, int] = {}   # host thread -> open devices that narrowed it
_pin_lock = threading.Lock()


def _keep_host_off(cpu: int) -> bool:
    """The scheduler's thread (and threads it starts later) leave the device's core to it.

    Undone when the thread's last device closes (``_release_host``): a library must
    not leave its caller's process on fewer CPUs, e.g. a benchmark that runs another
    engine with two threads afterwards.
    """
    if cpu < 0:
        return False
    with _pin_lock:
        tid = threading.get_native_id()
        _pin_count[tid] = _pin_count.get(tid, 0) + 1
        os.sched_setaffinity(0, set(_CPUS) - {cpu})
    return True


def _release_host(tid: int) -> None:
    with _pin_lock:
        _pin_count[tid] -= 1
        if _pin_count[tid] == 0:
            del _pin_count[tid]
            try:
                os.sched_setaffinity(tid, set(_CPUS))
            except OSError:
                pass   # the thread has ended


def _cleanup(proc: WorkerProcess, conn: Connection, ring: CommandRing, bell: Doorbell, sent,
             paths: list[str], pinned: list[int]) -> None:
    for tid in pinned:
        _release_host(tid)
    # A STOP in the ring; where it has no room (a worker stuck or gone), the bell's closing
    # tells a sleeping worker the host has gone.
    if ring.put(pickle.dumps((P.CONTROL, P.STOP))):
        sent[0] += 1
    try:
        bell.ring()
    except OSError:
        pass
    bell.close()
    try:
        proc.wait(timeout=_STOP_GRACE_S)   # the worker leaves at once on STOP (worker.leave)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    conn.close()
    ring.close()
    for path in paths:
        _shm.unlink(path)
