"""A CPU stand-in for ``torch.cuda``, so ``CudaDevice``'s own code runs without a GPU.

``cuda_double()`` points the ``torch`` name of ``engine/device/cuda.py`` and
``engine/device/syncdebug.py`` at a proxy of the real module whose ``cuda``
attribute is this file's fake, whose ``device("cuda")`` is the CPU and whose
``empty``/``zeros(..., pin_memory=True)`` return plain memory registered as pinned
(``Tensor.is_pinned`` answers from that registry, by address, as CUDA's pointer
query does). Everything else is real torch on the CPU. What the fake provides:

* **streams** are recorded but every op runs when it is enqueued (in program order);
* **events** stamp the host's monotonic clock when recorded; ``elapsed_time`` is
  float32 milliseconds, as ``cudaEventElapsedTime`` returns it;
* **graphs**: capture records every aten op dispatched inside ``torch.cuda.graph``
  (running it only for its outputs: writes into tensors from outside the capture go
  to clones, since a real capture executes nothing), and ``replay`` re-runs those
  ops on the same tensors: a captured graph's fixed addresses. Whatever was a Python value at capture
  (a shape, a host int) stays baked in, so a graph key that misses a dimension
  replays the wrong shape, as on a GPU. A host read of a device value inside a
  capture (``.item()``, ``nonzero``) raises, as capture does;
* **sync debug mode**: ``torch.cuda.synchronize`` and ``Stream.synchronize`` warn
  (or raise, in "error" mode) with torch's message; event waits do not, as in torch.

What it cannot show: real asynchrony (a missing stream wait never loses a race
here), device allocation (nothing to count, no ``cudaMalloc`` in the loop or
not), capture errors other than host reads (allocation outside the graph's pool,
ops a capture rejects), torch's sync warning from reading a device tensor
(``.item()`` on a CPU tensor warns nothing), the host blocking on a pageable
copy, and any timing: events stamp when the host reaches them.
"""
from __future__ import annotations

import time
import types
from contextlib import contextmanager

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

import photon_trace.engine.device.cuda as cuda_module
import photon_trace.engine.device.syncdebug as syncdebug_module

SYNC_MESSAGE = "called a synchronizing CUDA operation"
DEVICE_NAME = "CUDA double (CPU)"
_HOST_READS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.nonzero.default}


class FakeStream:
    """Ops run as they are enqueued; what waited on what is kept for tests to read."""

    def __init__(self, device=None, priority: int = 0) -> None:
        self.waited_on: list[object] = []

    def wait_stream(self, other: FakeStream) -> None:
        self.waited_on.append(other)

    def wait_event(self, event: FakeEvent) -> None:
        self.waited_on.append(event)

    def query(self) -> bool:
        return True


class FakeEvent:
    """Stamps host monotonic ns when recorded."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self.t_ns: int | None = None
        self.records = 0

    def record(self, stream: FakeStream | None = None) -> None:
        self.t_ns = time.monotonic_ns()
        self.records += 1

    def synchronize(self) -> None:
        pass   # torch's event synchronize is not a sync-debug "synchronizing operation"

    def query(self) -> bool:
        return True

    def wait(self, stream: FakeStream | None = None) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.t_ns is None or end.t_ns is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return float(np.float32((end.t_ns - self.t_ns) / 1e6))   # cudaEventElapsedTime: float ms


class _Recorder(TorchDispatchMode):
    """Inside a capture: keep each aten op with its inputs, and run it for its outputs'
    shapes without touching any tensor that exists outside the capture: an op that
    writes into its arguments (``index_copy_`` into the KV pool, ``out=`` into the
    logits) writes into clones, as a real capture executes nothing."""

    def __init__(self, ops: list) -> None:
        super().__init__()
        self.ops = ops
        self.made: set[int] = set()   # ids of tensors the capture itself produced

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _HOST_READS:
            raise RuntimeError(f"{func}: operation not permitted when stream is capturing (CUDA double)")
        run_args, run_kwargs = list(args), dict(kwargs)
        for i, a in enumerate(func._schema.arguments):
            if not (a.alias_info is not None and a.alias_info.is_write):
                continue
            where, key = (run_kwargs, a.name) if a.kwarg_only or i >= len(args) else (run_args, i)
            t = where.get(key) if where is run_kwargs else where[key]
            if isinstance(t, torch.Tensor) and id(t) not in self.made:
                where[key] = t.clone()
        out = func(*run_args, **run_kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.made.add(id(t))
        self.ops.append((func, args, kwargs, out))
        return out


class FakeGraph:
    """``torch.cuda.CUDAGraph``: the ops recorded at capture, replayed on the same tensors."""

    def __init__(self) -> None:
        self.ops: list = []
        self.replays = 0
        self._pool = object()

    def pool(self) -> object:
        return self._pool

    def replay(self) -> None:
        env: dict[int, torch.Tensor] = {}   # id(tensor produced at capture) -> its replay value

        def here(x):
            return env.get(id(x), x) if isinstance(x, torch.Tensor) else x

        for func, args, kwargs, out in self.ops:
            res = func(*tree_map(here, args), **tree_map(here, kwargs))
            for before, now in zip(tree_flatten(out)[0], tree_flatten(res)[0]):
                if isinstance(before, torch.Tensor):
                    env[id(before)] = now
        self.replays += 1


class FakeCuda(types.SimpleNamespace):
    """The parts of ``torch.cuda`` the CUDA backend uses; counters for tests."""

    def __init__(self) -> None:
        super().__init__()
        self.Stream, self.Event, self.CUDAGraph = FakeStream, FakeEvent, FakeGraph
        self.sync_debug_mode = 0
        self.synchronizes = 0
        self.captures = 0
        self._current = FakeStream()
        self.default = self._current

    def is_available(self) -> bool:
        return True

    def get_device_name(self, device=None) -> str:
        return DEVICE_NAME

    def current_stream(self, device=None) -> FakeStream:
        return self._current

    @contextmanager
    def stream(self, s: FakeStream | None):
        before = self._current
        self._current = s if s is not None else before
        try:
            yield
        finally:
            self._current = before

    @contextmanager
    def graph(self, cuda_graph: FakeGraph, pool=None, stream=None, capture_error_mode: str = "global"):
        self.synchronize()   # as torch.cuda.graph does before a capture
        self.captures += 1
        cuda_graph.ops.clear()
        with _Recorder(cuda_graph.ops):
            yield

    def get_sync_debug_mode(self) -> int:
        return self.sync_debug_mode

    def set_sync_debug_mode(self, mode) -> None:
        self.sync_debug_mode = {"default": 0, "warn": 1, "error": 2}.get(mode, mode)


# Torch reports a synchronizing call from inside its own code (c10's
# warn_or_error_on_sync): these functions are compiled under torch.cuda's file
# name, so SyncDebugCapture's frame walk passes over them as it passes over torch
# and names the caller's line.
_TORCH_SIDE = """
import warnings

ACTIVE = [None]

def warn_or_error_on_sync():
    mode = ACTIVE[0].sync_debug_mode if ACTIVE[0] is not None else 0
    if mode == 2:
        raise RuntimeError(MESSAGE)
    if mode == 1:
        warnings.warn(MESSAGE, UserWarning)

def device_synchronize(self, device=None):
    self.synchronizes += 1
    warn_or_error_on_sync()

def stream_synchronize(self):
    warn_or_error_on_sync()
"""
_torch_side: dict = {"MESSAGE": SYNC_MESSAGE}
exec(compile(_TORCH_SIDE, torch.cuda.__file__, "exec"), _torch_side)
FakeCuda.synchronize = _torch_side["device_synchronize"]
FakeStream.synchronize = _torch_side["stream_synchronize"]


class _TorchProxy(types.ModuleType):
    """``torch`` with a fake ``cuda``, ``device("cuda")`` on the CPU and pinned memory as plain memory."""

    def __init__(self, fake: FakeCuda, pinned: list[tuple[int, int]]) -> None:
        super().__init__("torch")
        self.cuda = fake
        self._pinned = pinned

    def __getattr__(self, name: str):
        return getattr(torch, name)

    @staticmethod
    def device(spec, index=None):
        kind = spec if isinstance(spec, str) else spec.type
        return torch.device("cpu") if kind.startswith("cuda") else torch.device(spec)

    def empty(self, *size, pin_memory: bool = False, **kwargs):
        return self._host(torch.empty(*size, **kwargs), pin_memory)

    def zeros(self, *size, pin_memory: bool = False, **kwargs):
        return self._host(torch.zeros(*size, **kwargs), pin_memory)

    def _host(self, t: torch.Tensor, pin_memory: bool) -> torch.Tensor:
        if pin_memory:
            self._pinned.append((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()))
        return t


@contextmanager
def cuda_double():
    """Within the block, the CUDA backend runs on the CPU through the fake; yields the fake."""
    fake = FakeCuda()
    pinned: list[tuple[int, int]] = []
    proxy = _TorchProxy(fake, pinned)
    real_is_pinned = torch.Tensor.is_pinned

    def is_pinned(t, device=None) -> bool:
        p = t.data_ptr()
        return any(lo <= p < hi for lo, hi in pinned) or real_is_pinned(t)

    active = _torch_side["ACTIVE"]
    saved = (cuda_module.torch, syncdebug_module.torch, active[0])
    cuda_module.torch = syncdebug_module.torch = proxy
    torch.Tensor.is_pinned = is_pinned
    active[0] = fake
    try:
        yield fake
    finally:
        cuda_module.torch, syncdebug_module.torch, active[0] = saved
        del torch.Tensor.is_pinned   # the class attribute goes; TensorBase's method shows again
