"""The fault families: faults injected into a real engine at the places a user's code goes
wrong, each with what the analysis must say about it. Shared by the fault tests and
``benchmarks/bench_attribution.py`` (which removes each fault and compares).

A fault is injected by patching a collaborator of the engine (its scheduler, device,
request book, or a module function the tick calls), never through a hook in the
engine. Every delay is sized from the clean run's measured step period, so no
machine's speed changes what a family is: "finalize outlasts the forward" holds on a
fast machine and a slow one alike. A delay is the fault itself (a sleep, or a busy
loop that holds the interpreter as a garbage-collection pause does); nothing here
waits for anything to happen.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import photon_trace.engine.engine as engine_module
from photon_trace.engine.device.base import NUM_SLOTS
from helpers.device_faults import control
from helpers.fault_helpers import Sleep, delay_before, patched, read_in_commit, replaced
from helpers.code_sites import ITEM_SITE, MASK_SYNC_SITE
from photon_trace.telemetry.analysis import Cause
from photon_trace.telemetry.analysis.bubbles import OUTSIDE_PHASES
from photon_trace.telemetry.tracer import now_ns


class Busy(Sleep):
    """A host delay that keeps the CPU and the interpreter (a GC pause, heavy Python)."""

    def __call__(self) -> None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < self.seconds:
            pass
        self.took.append(time.perf_counter() - t0)


class Every:
    """Call ``delay`` on every ``n``-th call only: an intermittent stall. ``spans`` keeps when
    each one ran, on the trace's clock."""

    def __init__(self, n: int, delay: Sleep) -> None:
        self.n, self.delay, self.calls = n, delay, 0
        self.took = delay.took
        self.spans: list[tuple[int, int]] = []

    def __call__(self) -> None:
        self.calls += 1
        if self.calls % self.n == 0:
            t0 = now_ns()
            self.delay()
            self.spans.append((t0, now_ns()))


def engine_only(eng, first_arg_of, wrap):
    """``wrap`` for a module function every engine in the process calls (``stage_plan``,
    ``fill_masks``): the fault applies where ``eng`` calls it, told by the first argument
    being one of its own (``first_arg_of(eng)``); another engine (a twin run beside it,
    ``benchmarks/interleave.py``) gets the original."""
    def engine_wrap(original):
        faulty = wrap(original)

        def gated(first, *args, **kwargs):
            own = any(first is x for x in first_arg_of(eng))
            return (faulty if own else original)(first, *args, **kwargs)
        return gated
    return engine_wrap


def stagings(eng) -> list:
    """The engine's staging buffers (``stage_plan``'s first argument)."""
    return [eng.device.staging(slot) for slot in range(NUM_SLOTS)]


def mask_buffers(eng) -> list:
    """Where the engine builds its masks (``fill_masks``'s first argument)."""
    return [st.mask for st in stagings(eng)] + [eng._pageable_mask]


def delay_after(delay):
    """``wrap`` for ``patched``: run ``delay()`` after each call of the original."""
    def wrap(original):
        def delayed(*args, **kwargs):
            out = original(*args, **kwargs)
            delay()
            return out
        return delayed
    return wrap


# -- the sync faults: each call below is a site the analysis must name -----------------------

def read_in_plan(eng, period_s: float) -> AbstractContextManager:
    """Plan reads a device value before planning (waits for the queued step to finish)."""
    def wrap(plan):
        def read_then_plan():
            eng.device.read_token_sync(0, -1)     # site: read in plan
            return plan()
        return read_then_plan
    return patched(eng.scheduler, "plan", wrap)


def read_in_stage(eng, period_s: float) -> AbstractContextManager:
    """Staging a step reads a device value first (as a ``.item()`` on a device tensor would)."""
    def wrap(stage_plan):
        def read_then_stage(st, plan, *args):
            eng.device.read_token_sync(0, plan.index)   # site: read in stage
            return stage_plan(st, plan, *args)
        return read_then_stage
    return patched(engine_module, "stage_plan", engine_only(eng, stagings, wrap))


def wait_in_plan(eng, period_s: float) -> AbstractContextManager:
    """Plan waits for the previous step's tokens (to read them early): the commit's own
    wait, called from the wrong place, serialises the pipeline."""
    last = []

    def wrap(plan):
        def wait_then_plan():
            if last and last[-1].slot >= 0:
                prev = last[-1]
                eng.device.wait_copied(prev.slot, prev.index)   # site: wait in plan
            out = plan()
            last[:] = [out] if out is not None else []
            return out
        return wait_then_plan
    return patched(eng.scheduler, "plan", wrap)


def sync_in_slow_plan(eng, period_s: float) -> AbstractContextManager:
    """A host already slow in plan (2 periods) that also reads a device value after the slow
    part, when the device has long finished: the sync itself costs a round trip. The slow
    part is the family's baseline (``plan_delay``), so it stays when the gate turns the read off."""
    def wrap(plan):
        def read_then_plan():
            eng.device.read_token_sync(0, -1)     # site: read in slow plan
            return plan()
        return read_then_plan
    stack = ExitStack()
    stack.enter_context(patched(eng.scheduler, "plan", wrap))
    stack.enter_context(patched(eng.scheduler, "plan", delay_before(delay := Sleep(2 * period_s)), gated=False))
    stack.delay = delay
    return stack


# -- host delays -------------------------------------------------------------------------------

def plan_delay(eng, period_s: float) -> AbstractContextManager:
    """Every plan 2 periods longer: host-bound in plan."""
    return _delayed(patched(eng.scheduler, "plan", delay_before(d := Sleep(2 * period_s))), d)


def stage_delay(eng, period_s: float) -> AbstractContextManager:
    """Staging every step 2 periods longer (inside launch): host-bound in launch."""
    d = Busy(2 * period_s)
    return _delayed(patched(engine_module, "stage_plan", engine_only(eng, stagings, delay_before(d))), d)


def slow_finalize(eng, period_s: float) -> AbstractContextManager:
    """Building the masks takes 1.5 periods: finalize outlasts the forward."""
    d = Busy(1.5 * period_s)
    return _delayed(patched(engine_module, "fill_masks", engine_only(eng, mask_buffers, delay_before(d))), d)


def commit_work(eng, period_s: float) -> AbstractContextManager:
    """Slow stream-out in commit after its wait (2 periods every step). A sleep: on a machine
    with fewer free cores than the engine's two processes, a busy host slows the device
    with it, and an every-step fault then shows as a slower device more than as idle."""
    return _delayed(patched(eng.device, "wait_copied", delay_after(d := Sleep(2 * period_s))), d)


def gc_pause(eng, period_s: float) -> AbstractContextManager:
    """Every 8th commit, a pause of 10 periods right after its wait (a GC pause holds the
    interpreter just so): host-bound in commit, however briefly the commit wait overlapped."""
    d = Every(8, Busy(10 * period_s))
    return _delayed(patched(eng.device, "wait_copied", delay_after(d)), d)


def stall_outside(eng, period_s: float) -> AbstractContextManager:
    """Every 8th tick, the hand-off of results to the caller (after every phase) stalls 10
    periods: host time outside the engine's phases."""
    d = Every(8, Sleep(10 * period_s))
    return _delayed(patched(eng.requests, "take_deltas", delay_before(d)), d)


def _delayed(cm: AbstractContextManager, delay) -> AbstractContextManager:
    stack = ExitStack()
    stack.enter_context(cm)
    stack.delay = delay     # what was injected, as the independent measure
    return stack


# -- a device-side fault, and two faults at once ----------------------------------------------

class _Injected:
    """A device fault's injected time as the worker counted it (``Sleep.took``'s stand-in):
    its mean per slowed op, once per op."""

    def __init__(self, ctl) -> None:
        self.ctl = ctl

    @property
    def took(self) -> list[float]:
        n = self.ctl.slowed
        return [self.ctl.injected_ns / n / 1e9] * n if n else []


def slow_forward(eng, period_s: float) -> AbstractContextManager:
    """One decode forward in four takes 2 periods longer, on the device (its worker spins: the
    engine's host sees nothing but a later copy). The engine must have been built inside
    ``device_faults.slowable``."""
    ctl = control(eng)
    ctl.delay_ns = int(2 * period_s * 1e9)
    ctl.reset_counts()
    stack = ExitStack()
    stack.enter_context(replaced(ctl, "every", 4))
    stack.delay = _Injected(ctl)
    return stack


def read_in_finalize(eng, period_s: float, gated: bool = True) -> AbstractContextManager:
    """Finalize reads a device value before building the masks (waits for the step's forward).
    ``gated`` False: on whatever the fault gate says (the part of a comparison kept on both sides)."""
    def wrap(fill_masks):
        def read_then_fill(masks, plan, *args):
            eng.device.read_token_sync(0, plan.index)   # site: read in finalize
            return fill_masks(masks, plan, *args)
        return read_then_fill
    return patched(engine_module, "fill_masks", engine_only(eng, mask_buffers, wrap), gated=gated)


def slow_plan(eng, period_s: float, gated: bool = True) -> AbstractContextManager:
    """Every plan 1 period longer (the second fault of ``two_faults``)."""
    return _delayed(patched(eng.scheduler, "plan", delay_before(d := Sleep(period_s)), gated=gated), d)


def two_faults(eng, period_s: float, switched: str | None = None) -> AbstractContextManager:
    """A device read in finalize and a plan 1 period slower, at once: the read makes the host
    wait for each forward, so the slow plan that follows lies on the critical path, and removing
    either gives back much of the other's idle too (issue 28, "two faults at once").
    ``switched``: "read" or "plan", the one fault the gate switches (the other stays on: what
    removing that one alone gives); None: both."""
    stack = ExitStack()
    stack.enter_context(read_in_finalize(eng, period_s, gated=switched in (None, "read")))
    stack.delay = stack.enter_context(_entered(slow_plan(eng, period_s, gated=switched in (None, "plan"))))
    return stack


@contextmanager
def _entered(cm):
    """Enter ``cm`` (an ``ExitStack`` with a ``delay``), giving its delay."""
    with cm:
        yield cm.delay


def mask_sync(eng, period_s: float) -> AbstractContextManager:
    """The mask-upload bug, an engine setting: the constrained engine with ``mask_upload="sync"``."""
    return replaced(eng, "config", replace(eng.config, mask_upload="sync"))


# -- the families ------------------------------------------------------------------------------

def _site(what: str) -> str:
    """``fault_families.py:N`` of the fault line that ends with ``# site: <what>``."""
    lines = Path(__file__).read_text().splitlines()
    (n,) = [i + 1 for i, line in enumerate(lines) if line.endswith(f"# site: {what}")]
    return f"{Path(__file__).name}:{n}"


@dataclass(frozen=True)
class Family:
    name: str
    inject: Callable[..., AbstractContextManager]   # (engine, clean period in s) -> the fault
    cause: str
    detail: str                 # the site or phase the analysis must name
    engine: str = "plain"       # which engine runs it (see ENGINES)
    baseline: str = "clean"     # the run without the fault, on the same engine
    intermittent: bool = False  # the fault hits some steps only
    top: tuple[str, str] | None = None   # the costliest host cause, when not the fault's own row
    also: tuple[tuple[str, str, str], ...] = ()   # more faults at once: (cause, detail, its switch: the
                                                  # ``switched`` that removes that fault alone), each charged
                                                  # what its own removal gives back
    switch: str | None = None   # with ``also``: the ``switched`` that removes the family's own fault alone
    device: bool = False        # a device-side fault: no bubble, a device-side finding on ``detail`` (an op)


ENGINES = {
    "plain": dict(depth=2, constrained=False),
    "constrained": dict(depth=2, constrained=True),
    "blocking": dict(depth=1, constrained=False),
}
BASELINES = {"plain": "clean", "constrained": "clean_constrained", "blocking": "clean_blocking"}
"""The clean run of each engine that has one (the mask-sync engine's clean twin is the constrained one)."""

FAMILIES = [
    Family("mask_sync", mask_sync, Cause.ACCIDENTAL_SYNC, MASK_SYNC_SITE, engine="constrained",
           baseline="clean_constrained"),
    Family("read_in_commit", lambda eng, period_s: read_in_commit(eng), Cause.ACCIDENTAL_SYNC, ITEM_SITE),
    Family("read_in_plan", read_in_plan, Cause.ACCIDENTAL_SYNC, _site("read in plan")),
    Family("read_in_stage", read_in_stage, Cause.ACCIDENTAL_SYNC, _site("read in stage")),
    Family("wait_in_plan", wait_in_plan, Cause.ACCIDENTAL_SYNC, _site("wait in plan")),
    Family("sync_in_slow_plan", sync_in_slow_plan, Cause.ACCIDENTAL_SYNC, _site("read in slow plan"),
           baseline="plan_delay", top=(Cause.HOST_BOUND, "plan")),
    Family("plan_delay", plan_delay, Cause.HOST_BOUND, "plan"),
    Family("stage_delay", stage_delay, Cause.HOST_BOUND, "launch"),
    Family("slow_finalize", slow_finalize, Cause.HOST_BOUND, "finalize", engine="constrained",
           baseline="clean_constrained"),
    Family("commit_work", commit_work, Cause.HOST_BOUND, "commit"),
    Family("gc_pause", gc_pause, Cause.HOST_BOUND, "commit", intermittent=True),
    Family("stall_outside", stall_outside, Cause.HOST_BOUND, OUTSIDE_PHASES, intermittent=True),
    Family("blocking_plan_delay", plan_delay, Cause.HOST_BOUND, "plan", engine="blocking", baseline="clean_blocking"),
    Family("slow_forward", slow_forward, "device", "forward", device=True),
    Family("read_in_finalize", read_in_finalize, Cause.ACCIDENTAL_SYNC, _site("read in finalize"),
           engine="constrained", baseline="clean_constrained"),
    Family("slow_plan", slow_plan, Cause.HOST_BOUND, "plan", engine="constrained", baseline="clean_constrained"),
    Family("two_faults", two_faults, Cause.ACCIDENTAL_SYNC, _site("read in finalize"), engine="constrained",
           baseline="clean_constrained", also=((Cause.HOST_BOUND, "plan", "plan"),), switch="read"),
]
BY_NAME = {f.name: f for f in FAMILIES}
