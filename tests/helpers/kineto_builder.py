"""PyTorch profiler (Kineto) traces built event by event, as the profiler writes them.

``KinetoBuilder`` makes the events the importer reads (``cpu_op``, ``user_annotation``,
``cuda_runtime`` launches with their ``kernel``/``gpu_memcpy`` and ``ac2g`` flows,
``cuda_sync``), in integer µs like a CUDA trace. ``training_trace`` builds a long,
realistic one (steps of ops launching kernels on a compute stream, an all-reduce on a
second stream joined by ``cudaStreamWaitEvent``, a ``.item()`` sync per step) for the
scale benchmark and tests.
"""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

PID = 4242
TID = 4242


class KinetoBuilder:
    def __init__(self, pid: int = PID, tid: int = TID, device: int = 0):
        self.pid, self.tid, self.device = pid, tid, device
        self.events: list[dict] = []
        self._corr = 1000
        self._threads = {tid}
        self._streams: set[int] = set()

    def _x(self, cat: str, name: str, ts: float, dur: float, tid: int | None = None, pid: int | None = None,
           **args) -> dict:
        e = {"ph": "X", "cat": cat, "name": name, "pid": self.pid if pid is None else pid,
             "tid": self.tid if tid is None else tid, "ts": ts, "dur": dur, "args": args}
        if e["pid"] == self.pid:
            self._threads.add(e["tid"])
        self.events.append(e)
        return e

    def annotation(self, name: str, ts: float, dur: float, tid: int | None = None) -> dict:
        return self._x("user_annotation", name, ts, dur, tid)

    def op(self, name: str, ts: float, dur: float, tid: int | None = None) -> dict:
        return self._x("cpu_op", name, ts, dur, tid)

    def runtime(self, name: str, ts: float, dur: float, tid: int | None = None, corr: int | None = None) -> int:
        if corr is None:
            self._corr += 1
            corr = self._corr
        self._x("cuda_runtime", name, ts, dur, tid, correlation=corr, cbid=0)
        return corr

    def launch(self, kernel: str, stream: int, call_ts: float, call_dur: float, ts: float, dur: float, *,
               cat: str = "kernel", call: str = "cudaLaunchKernel", tid: int | None = None,
               flows: bool = True, **args) -> int:
        """A runtime call and the device op it launched, linked by correlation id (and ac2g flows)."""
        corr = self.runtime(call, call_ts, call_dur, tid)
        self._streams.add(stream)
        self._x(cat, kernel, ts, dur, stream, self.device, device=self.device, stream=stream,
                correlation=corr, **args)
        if flows:
            self.events.append({"ph": "s", "id": corr, "pid": self.pid, "tid": self.tid if tid is None else tid,
                                "ts": call_ts, "cat": "ac2g", "name": "ac2g"})
            self.events.append({"ph": "f", "id": corr, "pid": self.device, "tid": stream, "ts": ts,
                                "cat": "ac2g", "name": "ac2g", "bp": "e"})
        return corr

    def sync_record(self, kind: str, ts: float, dur: float, corr: int, stream: int = -1, **args) -> None:
        """The device-side ``cuda_sync`` record of a runtime call (``kind``: "Stream Sync", "Wait Event"...)."""
        self._x("cuda_sync", kind, ts, dur, stream, self.device, cuda_sync_kind=kind, stream=stream,
                correlation=corr, device=self.device, **args)

    def doc(self, **meta) -> dict:
        names = [{"ph": "M", "name": "thread_name", "pid": self.pid, "tid": t, "args": {"name": f"thread {t} (python)"}}
                 for t in sorted(self._threads)]
        names += [{"ph": "M", "name": "thread_name", "pid": self.device, "tid": s, "args": {"name": f"stream {s} "}}
                  for s in sorted(self._streams)]
        return {"schemaVersion": 1, "deviceProperties": [{"id": self.device, "name": "Test GPU"}], **meta,
                "traceEvents": self.events + names}

    def write(self, path: Path, **meta) -> Path:
        data = json.dumps(self.doc(**meta)).encode()
        path.write_bytes(gzip.compress(data, 3) if path.name.endswith(".gz") else data)
        return path


def training_trace(steps: int, *, kernels_per_step: int = 40, seed: int = 0, t0: int = 1_000_000,
                   rich: bool = False) -> KinetoBuilder:
    """``steps`` ProfilerSteps of a training-like loop; ~5 events per kernel (op, launch, kernel, 2 flows).

    Each step is ``training_step``'s. ``tests/helpers/scale_traces.py`` writes the same steps
    as a stream, for traces too large to hold.
    """
    rnd = random.Random(seed)
    b = KinetoBuilder()
    t = t0
    for step in range(steps):
        t = training_step(b, rnd, step, t, kernels_per_step, rich=rich)
    return b


# With ``rich``, an op of these names runs its kernel from a nested op, as ATen dispatches it.
NESTED = {"aten::linear": "aten::addmm", "aten::layer_norm": "aten::native_layer_norm"}


def training_step(b: KinetoBuilder, rnd: random.Random, step: int, t: int, kernels_per_step: int, *,
                  rich: bool = False) -> int:
    """Add ProfilerStep#``step`` of a training-like loop starting at ``t`` to ``b``; returns when
    the next step may start.

    ``kernels_per_step`` ops each launching one kernel on stream 7 (sometimes the host falls
    behind the device: Python overhead between ops), an all-reduce on stream 23 that stream 7
    then waits for (``cudaStreamWaitEvent``), and a loss ``.item()``: a DtoH copy into pageable
    memory and a ``cudaStreamSynchronize``. ``rich`` (the scale benchmark's trace) adds the
    nesting of a real one: the step's input copied HtoD on stream 11 from ``aten::to`` >
    ``aten::_to_copy`` > ``aten::copy_``, and ``aten::linear`` / ``aten::layer_norm`` launching
    from a nested op; without it the events are the same as before it existed.
    """
    start = t
    device_free = t        # when stream 7 runs out of queued work
    if rich:
        # the batch comes in: a pinned HtoD copy on stream 11 that stream 7 orders after
        b.op("aten::to", t, 14)
        b.op("aten::_to_copy", t + 1, 12)
        b.op("aten::copy_", t + 2, 10)
        copy_ts = t + 6
        b.launch("Memcpy HtoD (Pinned -> Device)", 11, t + 3, 5, copy_ts, 20, cat="gpu_memcpy",
                 call="cudaMemcpyAsync", bytes=1 << 20)
        b.runtime("cudaEventRecord", t + 9, 1)
        corr = b.runtime("cudaStreamWaitEvent", t + 11, 1)
        b.sync_record("Wait Event", t + 11, 0, corr, stream=7, wait_on_stream=11)
        device_free = copy_ts + 20
        t += 14
    for k in range(kernels_per_step):
        py = rnd.choice((3, 4, 5, 30)) if k else 10          # Python between ops, µs
        t += py
        op_dur = 12
        name = rnd.choice(("aten::linear", "aten::relu", "aten::add", "aten::mul", "aten::layer_norm"))
        b.op(name, t, op_dur)
        if rich and name in NESTED:
            b.op(NESTED[name], t + 1, op_dur - 2)
        kernel_ts = max(t + 6, device_free + 2)
        kdur = rnd.choice((8, 15, 25, 60))
        b.launch(f"kernel_{k % 7}", 7, t + 2, 6, kernel_ts, kdur)
        device_free = kernel_ts + kdur
        t += op_dur
        if k == kernels_per_step // 2:
            # all-reduce on stream 23, joined back to stream 7 by an event
            nccl_ts = device_free + 3
            b.op("nccl:all_reduce", t + 1, 10)
            b.launch("ncclKernel_AllReduce_RING_LL_Sum_float", 23, t + 2, 6, nccl_ts, 80)
            b.runtime("cudaEventRecord", t + 9, 2)
            corr = b.runtime("cudaStreamWaitEvent", t + 12, 2)
            b.sync_record("Wait Event", t + 12, 0, corr, stream=7, wait_on_stream=23)
            device_free = nccl_ts + 80
            t += 15
    # loss.item(): a pageable copy after everything queued, then a stream sync
    t += 5
    item = b.op("aten::item", t, 0)
    inner = b.op("aten::_local_scalar_dense", t + 1, 0)
    copy_ts = max(t + 8, device_free + 2)
    b.launch("Memcpy DtoH (Device -> Pageable)", 7, t + 3, copy_ts + 2 - (t + 3), copy_ts, 2,
             cat="gpu_memcpy", call="cudaMemcpyAsync", bytes=4)
    corr = b.runtime("cudaStreamSynchronize", copy_ts + 3, 3)
    b.sync_record("Stream Sync", copy_ts + 3, 2, corr, stream=7)
    end = copy_ts + 7
    item["dur"] = inner["dur"] = end - t - 1
    item["dur"] += 1
    t = end + 20
    b.annotation(f"ProfilerStep#{step}", start, t - start)
    return t
