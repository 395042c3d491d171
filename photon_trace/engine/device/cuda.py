"""The CUDA backend: torch streams and events, pinned staging, CUDA graphs for decode.

Ops are enqueued from the host thread. The compute stream runs both slots'
forwards and samplings; the copy stream carries copy-backs (each waiting on its
own step's "sampled" event, never on the whole compute stream) and mask uploads
(the compute stream waits on the upload's event). Decode forwards are captured
once per (slot, batch bucket, page bucket) and replayed: a slot's buffers have
fixed addresses, which is what lets a graph be reused.
"""
from __future__ import annotations

import numpy as np
import torch

from photon_trace.telemetry.tracer import NULL_TRACER, DeviceOp, Stream, Tracer, now_ns
from photon_trace.engine.device.base import CompletedOp, Device, DeviceError, DeviceSpec, LaunchShape
from photon_trace.engine.device.sampling import SamplingMode
from photon_trace.engine.device.program import build_program, torch_dtype
from photon_trace.engine.device.staging import SlotStaging, layout
from photon_trace.engine.device.syncdebug import PinnedCheck, SyncDebugCapture

_BATCH_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
_BRACKETS = 5   # host brackets of an idle event per clock anchor or drift check; the narrowest wins


def float32_step_ns(ms: float) -> int:
    """The spacing of float32 around ``ms`` milliseconds, in ns: the resolution of an
    elapsed time that ``cudaEventElapsedTime`` returns."""
    return int(np.spacing(np.float32(abs(ms))) * 1e6)


def _bucket(n: int, buckets) -> int:
    for b in buckets:
        if b >= n:
            return b
    return n


class CudaDevice(Device):
    backend = "cuda"

    def __init__(self, spec: DeviceSpec, tracer: Tracer = NULL_TRACER) -> None:
        super().__init__(spec, tracer)
        if not torch.cuda.is_available():
            raise DeviceError("backend 'cuda' asked for, but torch sees no CUDA device")
        dev = torch.device("cuda")
        self.device_name = torch.cuda.get_device_name(dev)
        self.program = build_program(spec, dev)
        self.compute = torch.cuda.Stream(dev)
        self.copy = torch.cuda.Stream(dev)
        # Pinned staging, one block per slot; numpy views for the host's writes,
        # torch views of the same pinned storage for truly asynchronous copies.
        # Zeroed, as the host-process device's shared memory is: the forward gathers
        # the token table at every token's ``token_row``, prompt tokens included
        # (``torch.where`` evaluates both sides), so a never-written entry must be a
        # valid row, not whatever the allocator left there (a device-side assert).
        lay = layout(spec.shape)
        self._pinned = [torch.zeros(spec.shape.nbytes(), dtype=torch.uint8, pin_memory=True)
                        for _ in range(self.num_slots)]
        self._staging = [SlotStaging(spec.shape, p.numpy()) for p in self._pinned]
        self._host = [{name: p[off:off + n].view(torch_dtype(dt)).view(shape)
                       for name, (off, n, dt, shape) in lay.items()} for p in self._pinned]
        ev = torch.cuda.Event
        self._sampled = [ev() for _ in range(self.num_slots)]
        self._copied = [ev() for _ in range(self.num_slots)]
        self._mask_ready = [ev() for _ in range(self.num_slots)]
        self._timing = [[(ev(enable_timing=True), ev(enable_timing=True)) for _ in DeviceOp]
                        for _ in range(self.num_slots)]
        self._graphs: dict[tuple[int, int, int], torch.cuda.CUDAGraph] = {}
        self._pool = None
        self._page_buckets = tuple(sorted({min(2 ** i, spec.shape.max_pages) for i in range(16)}))
        self._pin_check = PinnedCheck()   # sync detection: copies from pageable memory (see syncdebug)
        self.anchor_clock()

    def _bracket(self) -> tuple[torch.cuda.Event, int, int]:
        """An event recorded on the idle compute stream between two host timestamps: the
        narrowest bracket of a few (a preemption or a slow wake-up widens one, not all)."""
        best = None
        for _ in range(_BRACKETS):
            ev = torch.cuda.Event(enable_timing=True)
            t0 = now_ns()
            ev.record(self.compute)
            ev.synchronize()
            t1 = now_ns()
            if best is None or t1 - t0 < best[2] - best[1]:
                best = (ev, t0, t1)
        return best

    def anchor_clock(self) -> dict[str, int | str]:
        """Device event times are ``anchor + elapsed_time(anchor, event)``, and elapsed time
        is float32 milliseconds (62 us steps ten minutes after the anchor): re-anchored at
        the start of every run, while the device is idle, so a run's times stay fine."""
        torch.cuda.synchronize()
        ev, t0, t1 = self._bracket()
        self._anchor_ev, self.anchor_ns, self.anchor_error_ns = ev, (t0 + t1) // 2, (t1 - t0 + 1) // 2
        return {"device_clock": "CUDA events through an idle anchor event", "anchor_ns": self.anchor_ns,
                "device_error_ns": self.anchor_error_ns, "anchor_brackets": _BRACKETS}

    def clock_drift(self) -> dict[str, int]:
        """Where the anchor puts an idle event against the host's bracket of it: the drift
        of the device clock from the host's since the anchor, and the bound on that figure
        (both brackets and the float32 rounding of the elapsed time)."""
        torch.cuda.synchronize()
        ev, t0, t1 = self._bracket()
        ms = self._anchor_ev.elapsed_time(ev)
        step = float32_step_ns(ms)
        placed = self.anchor_ns + round(ms * 1e6)
        return {"drift_ns": placed - (t0 + t1) // 2, "drift_after_ns": (t0 + t1) // 2 - self.anchor_ns,
                "drift_error_ns": self.anchor_error_ns + (t1 - t0 + 1) // 2 + step // 2 + 1,
                "resolution_ns": step}

    # -- helpers ---------------------------------------------------------------------------
    def _timed(self, slot: int, op: DeviceOp, stream: torch.cuda.Stream, fn) -> None:
        begin, end = self._timing[slot][op]
        self._issue(slot, op, Stream.COMPUTE if stream is self.compute else Stream.COPY)
        begin.record(stream)
        fn()
        end.record(stream)

    def sync_debug(self) -> SyncDebugCapture:
        """Context manager for a run: torch's sync-debug warnings recorded as accidental syncs
        (not inside the audited waits, nor a graph capture's one-off synchronize)."""
        return SyncDebugCapture(self, skip=(Device._traced_wait.__code__, CudaDevice._capture.__code__))

    def _copy(self, host_tensors, fn, what: str):
        """``fn`` enqueues a copy with these host tensors on one side. Sync detection: if one
        is pageable the copy blocks the host, so it runs as an unexpected host wait (call site:
        the engine line that asked for the op)."""
        if not self._pin_check.pageable(host_tensors):
            return fn
        return lambda: self._traced_wait(fn, f"{what}: pageable host memory, the copy blocks the host", -1,
                                          expected=False)

    def _graph_forward(self, slot: int, B: int, P: int) -> None:
        rows, pages = _bucket(B, _BATCH_BUCKETS), _bucket(P, self._page_buckets)
        graph = self._graphs.get((slot, rows, pages))
        if graph is None:
            self._capture(slot, rows, pages)
            graph = self._graphs[(slot, rows, pages)]
        graph.replay()

    def _capture(self, slot: int, rows: int, pages: int) -> None:
        """First use of a (slot, batch, page) bucket: warm up, then capture (a one-off sync;
        ``workload.warm_up`` makes measured runs meet no new bucket). The warm-up forward
        writes the K/V this step's forward writes next, so it is harmless. Only this
        slot's buffers hold inputs of this shape now: capturing the other slot too
        would warm it up on another step's inputs."""
        padded = LaunchShape(num_tokens=rows, num_rows=rows, max_pages=pages, max_query_len=1, prefill=False)
        side = torch.cuda.Stream()
        side.wait_stream(self.compute)
        with torch.cuda.stream(side):
            self.program.forward(slot, padded)
        self.compute.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            self.program.forward(slot, padded)
        self._pool = graph.pool()
        self._graphs[(slot, rows, pages)] = graph

    # -- the operations ------------------------------------------------------------------------
    def staging(self, slot: int) -> SlotStaging:
        return self._staging[slot]

    def forward(self, slot: int, shape: LaunchShape) -> None:
        self._begin_step(slot)
        T, B, P = shape.num_tokens, shape.num_rows, shape.max_pages
        graphed = self.spec.cuda_graphs and not shape.prefill and shape.max_query_len == 1
        rows = _bucket(B, _BATCH_BUCKETS) if graphed else B
        if graphed and rows > self.spec.shape.max_rows:
            graphed, rows = False, B
        # rows [B, rows) of the bucket and page columns past P: harmless padding
        self._staging[slot].pad_rows(T, B, rows, P)
        op = DeviceOp.PREFILL if shape.prefill else DeviceOp.FORWARD
        block = self._pinned[slot]   # the pinned check covers what is staged, not the copy-back's landing zone
        with torch.cuda.stream(self.compute):
            self._timed(slot, DeviceOp.STAGE, self.compute,
                        self._copy((block,), lambda: self.program.stage(slot, block, rows), "stage"))
            if graphed:
                self._timed(slot, op, self.compute, lambda: self._graph_forward(slot, B, P))
            else:
                self._timed(slot, op, self.compute, lambda: self.program.forward(slot, shape))

    def sample(self, slot: int, lo: int, hi: int, *, masked: bool, mode: SamplingMode) -> None:
        op = DeviceOp.MASKED_SAMPLE if masked else DeviceOp.SAMPLE
        self._note_sample(slot, mode)
        with torch.cuda.stream(self.compute):
            self._timed(slot, op, self.compute,
                        lambda: self.program.sample(slot, lo, hi, masked=masked, mode=mode))

    def upload_mask(self, slot: int, lo: int, hi: int) -> None:
        host_mask = self._host[slot]["mask"]
        with torch.cuda.stream(self.copy):
            self._timed(slot, DeviceOp.MASK_UPLOAD, self.copy,
                        self._copy((host_mask,), lambda: self.program.upload_mask(slot, host_mask, lo, hi),
                                   "mask upload"))
            self._mask_ready[slot].record(self.copy)
        self.compute.wait_event(self._mask_ready[slot])

    def upload_mask_sync(self, slot: int, mask: np.ndarray, lo: int, hi: int, step: int) -> None:
        # The bug, faithfully: a tensor made from ordinary (pageable) numpy memory
        # and a blocking copy on the compute stream, which torch completes with a
        # stream synchronize: the host stalls until the device has drained.
        pageable = torch.from_numpy(mask[lo:hi])
        dst = self.program.slots[slot].mask[lo:hi]

        def copy() -> None:
            with torch.cuda.stream(self.compute):
                self._timed(slot, DeviceOp.MASK_UPLOAD, self.compute, lambda: dst.copy_(pageable))

        self._traced_wait(copy, "mask upload: pageable copy waits for the device to drain", step, expected=False)

    def copy_back(self, slot: int, B: int) -> None:
        self._sampled[slot].record(self.compute)
        self.copy.wait_event(self._sampled[slot])  # this step's sampling only, not what follows it
        host = self._host[slot]
        logprobs = self._logprobs[slot]
        outs = [t for name, t in host.items() if name.startswith("out_") and (logprobs or name == "out_tokens")]
        with torch.cuda.stream(self.copy):
            self._timed(slot, DeviceOp.COPY_BACK, self.copy,
                        self._copy(outs, lambda: self.program.copy_back(slot, host, B, logprobs), "copy-back"))
            self._copied[slot].record(self.copy)

    def _copied_waiter(self, slot: int):
        copied = self._copied[slot]
        return lambda: self._wait_working(copied.query, copied.synchronize)

    def read_token_sync(self, row: int, step: int) -> int:
        out = []

        def read() -> None:
            with torch.cuda.stream(self.compute):
                out.append(int(self.program.read_table(row).item()))

        self._traced_wait(read, "host read of a device value", step, expected=False)
        return out[0]

    def completed_ops(self, slot: int) -> list[CompletedOp]:
        res = []
        for op, (stream, enq) in self._issued[slot].items():
            begin, end = self._timing[slot][op]
            t0 = self.anchor_ns + round(self._anchor_ev.elapsed_time(begin) * 1e6)
            t1 = self.anchor_ns + round(self._anchor_ev.elapsed_time(end) * 1e6)
            res.append(CompletedOp(stream, op, t0, t1, enq))
        return res

    def close(self) -> None:
        torch.cuda.synchronize()
        self._graphs.clear()

