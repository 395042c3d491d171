"""A fix's observed gain, measured within one run: blocks of steps with and without the fault.

A shared machine's speed drifts by several percent over seconds (two back-to-back runs of
the same engine differ by up to 5% here), more than the gain of removing one sync (1-5%),
and two engine instances taking turns differ by 1-2% in an A/A comparison (1.011, 0.986,
0.983 measured: where their memory landed). So one engine runs the workload with the
fault switched on and off every ``ticks`` scheduler ticks (``switch(on)``, between ticks),
and each block with the fault is compared with the two blocks without it on either side
(their mean: the run's steps get slower as the sequences grow, linearly over a few
blocks), tens of milliseconds apart, within the analysis's steady window (the blocks of
the first prefills would count twice on one side).

A block's first ``skip`` steps are left out: the step in flight when the switch turned
still ran under the other setting, and a fault's effect may lag a step.

Checked with a switch that changes nothing (A/A; 16 streams x 512 tokens, 4 runs, blocks of
13 ticks): 0.999 [0.995-1.004] pipelined, 1.000 [0.996-1.005] constrained, 1.000
[0.979-1.020] blocking.
"""
from __future__ import annotations

import random
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Callable, NamedTuple

from photon_trace.telemetry.analysis.window import steady_state_window, step_starts
from photon_trace.telemetry.tracer import TraceLevel, now_ns
from photon_trace.traced_run import trace_run


class Switched(NamedTuple):
    """One switching run: its compared blocks, and what it generated (``outputs_digest``);
    ``blocks``: each block inside the steady window, (t0, t1, on) on the trace's clock, and
    ``path`` the trace, for a measure of the blocks other than their periods (their idle)."""
    pairs: list[tuple[float, float]]
    digest: str
    blocks: tuple[tuple[int, int, bool], ...] = ()
    path: Path | None = None


class Alternated(NamedTuple):
    ratio: float           # the period with the fault over the period without (all blocks pooled)
    low: float             # a 90% bootstrap interval over the blocks
    high: float
    blocks: int            # blocks with the fault compared


def run_alternating(engine, prepared, path: Path, switch: Callable[[bool], None], fault=None,
                    ticks: int = 13, skip: int = 2, start_on: bool = False,
                    rest_on: bool = True) -> Switched:
    """One traced run of ``prepared`` switching the fault every ``ticks`` ticks (``fault``:
    the context manager that installs it, for the whole run), the first block with it on
    where ``start_on``: a workload's schedule is the same in every run, so runs that start
    each way put each stretch of it in blocks of both kinds; the switch is left at
    ``rest_on`` (a fault gate on, as the engine's other users expect it). Its pairs: per
    interior block with the fault, (its summed step periods, the mean of its neighbours'
    over the same positions), ns."""
    blocks: list[tuple[int, int, bool]] = []      # (t0, t1, on) on the trace clock
    calls, state = 0, {"on": start_on, "t0": None}
    step = engine.step

    def alternating_step():
        nonlocal calls
        if calls % ticks == 0:
            if state["t0"] is not None:
                blocks.append((state["t0"], now_ns(), state["on"]))
                state["on"] = not state["on"]
            switch(state["on"])
            state["t0"] = now_ns()
        calls += 1
        return step()

    switch(start_on)
    engine.step = alternating_step         # the engine's own tick, switching (an instance attribute)
    try:
        with fault if fault is not None else nullcontext():
            trace, summary = trace_run(engine, prepared, path, TraceLevel.ON, analyse=False)
    finally:
        del engine.step
        switch(rest_on)
    w0, w1 = steady_state_window(trace)     # the analysis's window: the prediction's steps
    inside = [b for b in blocks if w0 <= b[0] and b[1] <= w1]
    pairs = matched(block_periods(trace, inside, skip))
    return Switched(pairs, summary["outputs_digest"], tuple(inside), path)


def block_periods(trace, blocks: list[tuple[int, int, bool]], skip: int) -> list[tuple[bool, list[int]]]:
    """Per block, (on, the periods (ns) of the steps that started inside it and whose next
    step did too, less the first ``skip``). Every kind of step, as the analysis's window
    has them: a fault that adds a fixed time to each step is a larger share of a decode
    step than of one with a prefill chunk, so leaving the latter out would overstate it."""
    starts = [t for t, _ in step_starts(trace)]
    out = []
    for b0, b1, on in blocks:
        inside = [t for t in starts if b0 <= t <= b1]
        out.append((on, [b - a for a, b in zip(inside, inside[1:])][skip:]))
    return out


def matched(blocks: list[tuple[bool, list[int]]]) -> list[tuple[float, float]]:
    """Each block with the fault beside the mean of its two neighbours without it, over the
    positions all three have (at least 4)."""
    out = []
    for (_, before), (on, mid), (_, after) in zip(blocks, blocks[1:], blocks[2:]):
        n = min(len(before), len(mid), len(after))
        if on and n >= 4:
            out.append((float(sum(mid[:n])), (sum(before[:n]) + sum(after[:n])) / 2))
    return out


def compare(pairs: list[tuple[float, float]], draws: int = 2000) -> Alternated:
    """The ratio of the summed periods with and without the fault over ``pairs`` (pooled over
    runs), with a bootstrap over the blocks."""
    if not pairs:
        raise ValueError("no block with the fault had neighbours with enough steps to compare")

    def ratio(sample) -> float:
        return sum(a for a, _ in sample) / sum(b for _, b in sample)

    rng = random.Random(0)
    boot = sorted(ratio([rng.choice(pairs) for _ in pairs]) for _ in range(draws))
    return Alternated(ratio(pairs), boot[int(0.05 * draws)], boot[int(0.95 * draws) - 1], len(pairs))


def depth_switch(engine) -> Callable[[bool], None]:
    """``switch`` for the blocking loop against the pipelined one on one engine: on = blocking
    (rest it off: the engine is pipelined).
    Going blocking, the step in flight is committed first, by a pipelined tick that launches
    nothing (the scheduler plans nothing for one call), as the pipelined loop's last tick
    does; the loop turns blocking as the next tick plans."""
    pipelined, blocking = replace(engine.config, depth=2), replace(engine.config, depth=1)
    scheduler = engine.scheduler

    def plan_nothing():
        scheduler.plan = plan_blocking
        return None

    def plan_blocking():
        del scheduler.plan
        engine.config = blocking
        return scheduler.plan()

    def switch(on: bool) -> None:
        if on and not engine.idle:
            scheduler.plan = plan_nothing
            return
        if "plan" in vars(scheduler):      # a turn to blocking the run ended before
            del scheduler.plan
        engine.config = blocking if on else pipelined
    return switch
