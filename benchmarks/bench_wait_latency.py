"""How late a host wait notices the device while the recorder works: the mechanism behind
"the trace flusher stalls the engine", isolated from everything else the engine does.

A "device" process (on its own core, as the host-process device's worker) marks an event
in shared memory every ``--period-us`` and notes when. The host thread, like the engine's,
does ``--host-us`` of Python work per tick (recording a step's worth of tracer calls),
then waits for the next event with the host-process device's spin-wait (spin, then the
tracer's ``work()`` slices, else ``sched_yield``). Lateness = when the wait returned -
when the event was marked. Modes, interleaved round by round in one process:

* ``none``: the no-op tracer (the floor: spin-wait and scheduling noise);
* ``waits``: a ``RecordingTracer`` (trace file + OTLP every step to a loopback receiver
  in another process): conversion and encoding in the wait's slices (this design);
* ``thread``: the same tracer and sinks, its cycles run whole by a flusher thread every
  flush interval, the wait doing none (the design before: a thread that converts and
  encodes takes the GIL from the waiting host for up to the 5 ms switch interval).

Never fails on speed; prints, for the events marked inside the recorder's flush windows
(its cycles and the sinks' deliveries) and for the others, the median/p90/p99/max lateness
and the share noticed more than 1 ms late.

    python benchmarks/bench_wait_latency.py --rounds 3 --seconds 4
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

from bench_trace_overhead import start_receiver
from photon_trace.engine.device import shm
from photon_trace.telemetry.recording.file_writer import TraceFileWriter
from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.tracer import NULL_TRACER, DeviceOp, Phase, StepKind, Stream, Tracer, TraceLevel

N_EVENTS = 1 << 16
_SPIN_NS = 50_000  # as the host-process device: a wait first spins this long

_DEVICE = """
import os, sys, time
import numpy as np
from photon_trace.engine.device import shm
a = np.frombuffer(shm.attach(sys.argv[1]), dtype=np.int64)
cpus = sorted(os.sched_getaffinity(0))
if len(cpus) > 1:
    os.sched_setaffinity(0, {cpus[-1]})
period = int(sys.argv[2]) / 1e6
while a[1] == 0:          # a[1]: 1 run, 2 stop
    time.sleep(0.001)
k = 0
while a[1] == 1:
    time.sleep(period)
    k += 1
    a[2 + (k %% %d)] = time.monotonic_ns()   # when it was marked, then the event itself
    a[0] = k
""" % N_EVENTS


class FlusherThread:
    """The design before: a thread that runs each whole flush cycle every interval."""

    def __init__(self, tracer: RecordingTracer, interval_s: float) -> None:
        self.tracer, self.stop = tracer, threading.Event()
        self.thread = threading.Thread(target=self._run, args=(interval_s,), name="flusher", daemon=True)
        self.thread.start()

    def _run(self, interval_s: float) -> None:
        while not self.stop.wait(interval_s):
            self.tracer.flush()


class ThreadTracer(RecordingTracer):
    """The recorder with its waits' slices turned off: cycles run only where flush() is called."""

    def work(self) -> bool:
        return False


def one_step(tr: Tracer, k: int, host_ns: int) -> None:
    """A step's tracer calls, with the host's own work spread between them."""
    t_end = time.monotonic_ns() + host_ns
    for phase in (Phase.PLAN, Phase.LAUNCH, Phase.COMMIT, Phase.FINALIZE):
        t0 = tr.begin(phase, k, k & 1)
        until = min(t_end, time.monotonic_ns() + host_ns // 4)
        while time.monotonic_ns() < until:
            pass
        tr.end(phase, k, k & 1, t0)
    now = time.monotonic_ns()
    for op in (DeviceOp.STAGE, DeviceOp.FORWARD, DeviceOp.SAMPLE):
        tr.device_op(Stream.COMPUTE, op, k, k & 1, now - 300_000, now - 100_000, now - 400_000)
    tr.device_op(Stream.COPY, DeviceOp.COPY_BACK, k, k & 1, now - 90_000, now - 80_000, now - 400_000)
    tr.host_wait("commit: copy-back", True, now - 200_000, now - 80_000, "engine/engine.py:1", k)
    tr.step(k, kind=StepKind.DECODE, slot=k & 1, rows=8, zombie_rows=0, constrained_rows=0, tokens=8)


def wait_for(a: np.ndarray, k: int, tr: Tracer) -> None:
    """The host-process device's spin-wait (hostproc.HostProcessDevice._wait_event, no sleep)."""
    spin_until = time.monotonic_ns() + _SPIN_NS
    work = tr.work
    while a[0] < k:
        if time.monotonic_ns() > spin_until and not work():
            os.sched_yield()


def run(mode: str, a: np.ndarray, args, tmp: str, r: int) -> tuple[list[int], list[int]]:
    """Lateness of the events marked inside the recorder's flush windows, and of the others."""
    from photon_trace.telemetry.export.otlp.sink import OtelSink

    flusher = None
    if mode == "none":
        tr: Tracer = NULL_TRACER
    else:
        sinks = [TraceFileWriter(os.path.join(tmp, f"{mode}-{r}.trace.jsonl")), OtelSink(every_n_steps=1)]
        cls = ThreadTracer if mode == "thread" else RecordingTracer
        tr = cls(TraceLevel.ON, sinks=sinks, nvtx=False, close_timeout_s=10.0,
                 flush_interval_s=None if mode == "thread" else args.flush_interval)
        if mode == "thread":
            flusher = FlusherThread(tr, args.flush_interval)
    events = []
    k = int(a[0])
    t_stop = time.monotonic() + args.seconds
    while time.monotonic() < t_stop:
        one_step(tr, k, args.host_us * 1000)
        k = max(k + 1, int(a[0]) + 1)          # the next event not yet marked
        wait_for(a, k, tr)
        marked = int(a[2 + (k % N_EVENTS)])
        events.append((marked, time.monotonic_ns() - marked))
    if flusher is not None:
        flusher.stop.set()
        flusher.thread.join()
    tr.close()
    windows = [] if mode == "none" else sorted(list(tr.windows) + [w for p in tr.sink_ports for w in p.windows])
    inside, outside = [], []
    j = 0
    for marked, late in events:   # in mark order; windows sorted by start
        while j < len(windows) and windows[j][1] < marked:
            j += 1
        hit = any(w0 <= marked <= w1 for w0, w1 in windows[max(0, j - 4):j + 4])
        (inside if hit else outside).append(late)
    return inside, outside


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0, help="per mode and round")
    ap.add_argument("--period-us", type=int, default=2000, help="the device's step")
    ap.add_argument("--host-us", type=int, default=300, help="the host's own work per step")
    ap.add_argument("--flush-interval", type=float, default=0.5)
    ap.add_argument("--modes", nargs="+", default=["none", "waits", "thread"])
    args = ap.parse_args()
    import tempfile
    import warnings
    warnings.simplefilter("ignore")

    path, mem = shm.create(8 * (2 + N_EVENTS))
    a = np.frombuffer(mem, dtype=np.int64)
    device = subprocess.Popen([sys.executable, "-c", _DEVICE, path, str(args.period_us)])
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, set(cpus[:-1]))   # the device's core is the device's
    receiver, endpoint = start_receiver()         # on the host's cores too, as a collector elsewhere
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    tmp = tempfile.mkdtemp(prefix="photon-wait-")
    print(f"device period {args.period_us} us, host work {args.host_us} us/step, flush every "
          f"{args.flush_interval} s, {args.seconds} s per mode x {args.rounds} rounds, cpus={os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.1f}")
    lat: dict[str, tuple[list[int], list[int]]] = {m: ([], []) for m in args.modes}
    try:
        a[1] = 1
        for r in range(args.rounds):
            for mode in args.modes[r % len(args.modes):] + args.modes[:r % len(args.modes)]:
                inside, outside = run(mode, a, args, tmp, r)
                lat[mode][0].extend(inside)
                lat[mode][1].extend(outside)
    finally:
        a[1] = 2
        device.wait()
        receiver.terminate()
        receiver.wait()
        shm.unlink(path)
    print("lateness of the events marked inside the recorder's flush windows (cycles, sink deliveries) "
          "and outside them")
    print(f"{'mode':>7} {'where':>8} {'events':>7} {'median us':>9} {'p90 us':>7} {'p99 us':>7} {'max ms':>7} "
          f"{'>1 ms late':>10}")
    for mode, groups in lat.items():
        for where, v in zip(("inside", "outside"), groups):
            if not v:
                continue
            v.sort()
            q = lambda f: v[min(len(v) - 1, int(f * len(v)))] / 1e3  # noqa: E731
            over = sum(x > 1_000_000 for x in v) / len(v)
            print(f"{mode:>7} {where:>8} {len(v):>7} {statistics.median(v) / 1e3:>9.0f} {q(0.9):>7.0f} "
                  f"{q(0.99):>7.0f} {v[-1] / 1e6:>7.1f} {100 * over:>9.1f}%")


if __name__ == "__main__":
    main()
