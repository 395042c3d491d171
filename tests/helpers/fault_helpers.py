"""Shared by the fault-injection tests: traced runs with faults, and how their cost is read.

A fault's *injected cost* is the device idle per step the host causes in the
faulty run beyond the clean run of the same workload (medians over steps); the
analysis is right when it attributes that much to the fault's cause and site. Idle, not the period's
whole growth: on a shared CPU a faulty run's device ops also run slower (a device
process that drains and sleeps every step comes back to cold caches and a busy
run queue), which lengthens the period without being idle any cause explains.
On a quiet machine, or a GPU, the two measures agree.
"""
from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from statistics import median
from pathlib import Path
from typing import NamedTuple

from photon_trace.telemetry.analysis import Cause, analyze
from photon_trace.telemetry.tracer import TraceLevel
from photon_trace.traced_run import trace_run

from helpers.code_sites import ROOT, engine_line, line_of  # noqa: F401  (the fault tests use them)

MS = 1e6


class Gate:
    """Whether the injected faults act: always, except in a benchmark that alternates blocks of
    steps with and without them on one engine (``benchmarks/interleave.py``), which flips it
    between ticks. A patched function asks it on each call; a replaced value is swapped."""

    def __init__(self) -> None:
        self.on = True
        self._values: list[list] = []     # [obj, name, faulty value, original value]

    def set(self, on: bool) -> None:
        self.on = on
        for obj, name, faulty, original in self._values:
            setattr(obj, name, faulty if on else original)

    @contextmanager
    def swapping(self, obj, name: str, value):
        """``obj.name`` is ``value`` while on, its original while off, for the block."""
        original = getattr(obj, name)
        entry = [obj, name, value, original]
        self._values.append(entry)
        setattr(obj, name, value if self.on else original)
        try:
            yield
        finally:
            self._values.remove(entry)
            setattr(obj, name, original)


GATE = Gate()


@contextmanager
def patched(obj, name: str, wrap, gated: bool = True):
    """Replace ``obj.name`` by ``wrap(original)`` for the block: a fault injected into a
    collaborator (the scheduler, the device, a module function the tick calls) as a test
    would fake any collaborator. ``gated``: the fault acts only while ``GATE`` is on
    (``False``: a part of the run the fault's comparison keeps on both sides)."""
    original = getattr(obj, name)
    own = name in vars(obj)   # a module's function, or an instance attribute already set
    faulty = wrap(original)

    def gated_call(*args, **kwargs):
        return (faulty if GATE.on else original)(*args, **kwargs)
    setattr(obj, name, gated_call if gated else faulty)
    try:
        yield
    finally:
        if own:
            setattr(obj, name, original)
        else:
            delattr(obj, name)    # the instance attribute goes; the class's method shows again


def replaced(obj, name: str, value):
    """Set ``obj.name`` to ``value`` for the block (while ``GATE`` is on; the original while off)."""
    return GATE.swapping(obj, name, value)


def delay_before(delay):
    """``wrap`` for ``patched``: run ``delay()`` before each call of the original."""
    def wrap(original):
        def delayed(*args, **kwargs):
            delay()
            return original(*args, **kwargs)
        return delayed
    return wrap


def read_in_commit(eng):
    """Fault (b): right after commit's wait, a host read of a device value."""
    def wrap(wait_copied):
        def wait_then_read(slot, step, **kw):
            wait_copied(slot, step, **kw)
            eng.device.read_token_sync(0, step)   # the read fault (b)'s site
        return wait_then_read
    return patched(eng.device, "wait_copied", wrap)


class Sleep:
    """An injected host delay (the fault itself, not a way to synchronise); remembers how
    long each sleep really took."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.took: list[float] = []

    def __call__(self) -> None:
        t0 = time.perf_counter()
        time.sleep(self.seconds)
        self.took.append(time.perf_counter() - t0)


class Runs:
    """Traced runs by name, several per name: name -> [(trace, report, path)]."""

    def __init__(self, out: Path, sync_debug: bool = False) -> None:
        self.out = out
        self.sync_debug = sync_debug
        self.runs: dict[str, list] = {}

    def run(self, name, engine, prepared, fault=None):
        """A traced run with ``fault`` (a context manager that injects it, e.g. ``patched``)."""
        with fault if fault is not None else nullcontext():
            path = self.out / f"{name}-{len(self.runs.get(name, ()))}.trace.jsonl"
            trace, _ = trace_run(engine, prepared, path, TraceLevel.ON, analyse=False,
                                 sync_debug=self.sync_debug)
        report = analyze(trace)
        self.runs.setdefault(name, []).append((trace, report, path))
        return report

    def __getitem__(self, name):
        return self.runs[name]

    def reports(self, name):
        return [rep for _, rep, _ in self.runs[name]]


def per_step(report, keep) -> list[int]:
    """Idle per window step (ns) of the bubbles ``keep(bubble)`` accepts (a bubble belongs to
    the step whose op closed its gap)."""
    idle = dict.fromkeys((s.step for s in report.steps), 0)
    for b in report.bubbles:
        if b.step in idle and keep(b):
            idle[b.step] += b.duration_ns
    return list(idle.values())


def median_ms(reports, keep) -> float:
    """The median over every window step of ``reports`` of the idle ``keep`` accepts, in ms.
    A median, because a shared machine now and then stalls a run for many periods at once
    (the device process or the host descheduled), which a mean would spread over every step."""
    return median(x for r in reports for x in per_step(r, keep)) / MS


def device_made(d) -> bool:
    """A bubble or diagnosis row for idle the device made itself: ``dispatch`` (the op sat in
    its queue: the device process picked it up late), ``copy_wait`` (the host-process
    device runs its copy stream on the same worker, so a mask upload is a small gap of its own)
    and ``device_busy`` (that worker still running the previous step's copy-back), and
    ``device_descheduled`` (that worker waiting for a CPU: the machine's load)."""
    return d.cause in (Cause.COPY_WAIT, Cause.DEVICE_BUSY, Cause.DISPATCH, Cause.DEVICE_DESCHEDULED)


NOT_RUNNING = (Cause.HOST_DESCHEDULED, Cause.HOST_BLOCKED)


def row_of(cause: str, detail: str) -> tuple[str, str]:
    """A (cause, detail) row with the host not running in a phase counted as the phase's own
    (``host_bound``): how much of an injected delay the thread spent off the CPU is the
    delay's kind (a sleep: all of it) and the machine's load (a busy loop beside other jobs:
    some), not where the fault is. ``test_faults_host_running.py`` checks the split itself."""
    return (Cause.HOST_BOUND if cause in NOT_RUNNING else cause), detail


def machine_made(d) -> bool:
    """A row (or bubble) of the host not running at a wait's call site (``engine.py:206``): the
    thread woke late from a wait whose copy had landed. On this shared machine that is the load,
    never a fault's (a fault in a phase shows at the phase)."""
    return d.cause in NOT_RUNNING and ".py:" in _where(d)


def _where(d) -> str:
    """A diagnosis row's site or phase; a bubble's detail."""
    return d.site_or_phase if hasattr(d, "site_or_phase") else d.detail


def host_made(b) -> bool:
    """Idle the host's code made: neither the device's own nor the machine's (``machine_made``).
    Beside busy processes the host wakes late from its commit wait in 5-70% of the steps of a
    clean and a faulty run alike, at random; counted, a median over steps would take it in
    one run and not in its twin, and a fault's measured cost would swing by a period."""
    return not device_made(b) and not machine_made(b)


def phase_rows(report) -> dict[tuple[str, str], int]:
    """Per ``row_of`` row of the host's making, its charge (``Diagnosis.charged_ns``) summed."""
    out: dict[tuple[str, str], int] = {}
    for d in report.diagnosis:
        if host_made(d):
            key = row_of(d.cause, d.site_or_phase)
            out[key] = out.get(key, 0) + d.charged_ns
    return out


def top_host_cause(report) -> tuple[str, str]:
    """(cause, detail) of the costliest idle the host caused (``row_of``'s rows, by charge)."""
    idle: dict[tuple[str, str], int] = {}
    for d in report.diagnosis:
        if host_made(d):
            key = row_of(d.cause, d.site_or_phase)
            idle[key] = idle.get(key, 0) + d.charged_ns   # what the report ranks by (charging)
    return max(idle, key=idle.get)


class Cost(NamedTuple):
    """A fault's cost per step in ms, over every repeat (faulty less clean)."""
    attributed: float    # what the analysis charges (cause, detail): per-step medians
    injected: float      # the idle the host's code added (``host_made``), whatever its label: per-step medians
    growth: float        # the mean step period's growth
    busy: float          # how much longer the device was busy per step (means): it ran slower

    @property
    def truth(self) -> tuple[float, float]:
        """The independent measure as a range: the idle the fault added, and that idle plus the
        device's own slowdown beside it. They agree where the device runs at one speed (its own
        chip); on a shared CPU a fault changes it (a host asleep in a drain leaves the device
        more of the CPU, -1.8 ms a step measured beside two busy processes), and the idle the
        fault added then includes the host work the faster device exposed, which removing the
        fault would hide again."""
        return min(self.injected, self.injected + self.busy), max(self.injected, self.injected + self.busy)

    def matches(self, rel: float, abs_ms: float = 0.0) -> bool:
        """``attributed`` within ``rel`` (or ``abs_ms``) of some point of ``truth``."""
        lo, hi = self.truth
        return lo - max(rel * abs(lo), abs_ms) <= self.attributed <= hi + max(rel * abs(hi), abs_ms)


def cost(runs: Runs, fault: str, clean: str, cause: str, detail: str) -> Cost:
    """The fault's ``Cost``: what the analysis charges (cause, detail) against what it did."""
    faulty, base = runs.reports(fault), runs.reports(clean)
    injected = median_ms(faulty, host_made) - median_ms(base, host_made)
    row = lambda b: row_of(b.cause, b.detail) == (cause, detail)   # noqa: E731
    attributed = median_ms(faulty, row) - median_ms(base, row)
    growth = mean_period_ms(faulty) - mean_period_ms(base)
    busy = growth - (mean_idle_ms(faulty) - mean_idle_ms(base))
    return Cost(attributed, injected, growth, busy)


def mean_period_ms(reports) -> float:
    return sum(r.mean_period_ms for r in reports) / len(reports)


def mean_idle_ms(reports) -> float:
    """Mean bubble idle per window step, every cause."""
    return sum(b.duration_ns for r in reports for b in r.bubbles) / sum(len(r.steps) for r in reports) / MS


@contextmanager
def pageable_copy_back(device):
    """CUDA backend: point both slots' copy-back landing zones at ordinary (pageable) host
    memory; the commit reads the same memory, so the run's tokens stay right."""
    import torch

    from photon_trace.engine.device.base import NUM_SLOTS

    saved = []
    for slot in range(NUM_SLOTS):
        host, staging = device._host[slot], device.staging(slot)
        saved.append((host["out_tokens"], staging.out_tokens))
        pageable = torch.zeros(host["out_tokens"].shape, dtype=host["out_tokens"].dtype)
        host["out_tokens"], staging.out_tokens = pageable, pageable.numpy()
    try:
        yield
    finally:
        for slot, (tensor, view) in enumerate(saved):
            device._host[slot]["out_tokens"], device.staging(slot).out_tokens = tensor, view
