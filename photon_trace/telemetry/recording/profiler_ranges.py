"""Our run seen by ``torch.profiler`` too: a tracer that also marks each host phase for it.

``ProfilerRanges(inner)`` forwards every call to ``inner`` (the recorder) and opens a
``record_function`` range per host phase, named ``<phase>#<step>`` (``launch#12``), so the
profiler's trace of the same run has our steps in it: importing it with
``step_annotation="launch"`` finds them. ``profiled(path)`` records a run with the profiler
(CPU activity, and CUDA on a GPU) and writes its Chrome trace to ``path`` (gzipped for
``.gz``). Used by ``photon-trace bench --torch-profiler``; torch is imported lazily.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from photon_trace.telemetry.tracer import Phase, Tracer

STEP_ANNOTATION = Phase.LAUNCH.span_name
"""The phase whose ranges mark a step in the profiler's trace: a step's kernels are launched in it."""


class ProfilerRanges(Tracer):
    def __init__(self, inner: Tracer):
        from torch.autograd.profiler import record_function

        self.inner = inner
        self.level = inner.level
        self._range = record_function
        self._open: list = []
        self._names = {p: p.span_name for p in Phase}

    def begin(self, phase: Phase, step: int, slot: int) -> int:
        r = self._range(f"{self._names[phase]}#{step}")
        r.__enter__()
        self._open.append(r)
        return self.inner.begin(phase, step, slot)

    def end(self, phase: Phase, step: int, slot: int, t0: int) -> None:
        self.inner.end(phase, step, slot, t0)
        if self._open:
            self._open.pop().__exit__(None, None, None)

    def begin_wait(self) -> int:
        return self.inner.begin_wait()

    def host_wait(self, *args) -> None:
        self.inner.host_wait(*args)

    def device_op(self, *args) -> None:
        self.inner.device_op(*args)

    def device_ops(self, step: int, slot: int, read) -> None:
        self.inner.device_ops(step, slot, read)

    def step(self, step: int, **counts) -> None:
        self.inner.step(step, **counts)

    def request(self, *args, **kwargs) -> None:
        self.inner.request(*args, **kwargs)

    def describe(self, **header: object) -> None:
        self.inner.describe(**header)

    def close(self) -> None:
        self.inner.close()


@contextmanager
def profiled(path: str | os.PathLike, *, cuda: bool = False) -> Iterator[None]:
    """Record what runs inside with ``torch.profiler`` and write its trace to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        yield
    prof.export_chrome_trace(str(path))
