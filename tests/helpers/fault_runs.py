"""The session's one set of traced fault runs, read by both fault modules
(``test_faults_engine.py``, ``test_faults_attribution.py``; the fixture is ``fault_runs`` in
conftest.py): one workload, two engines, every fault and its clean twin.

The engine module's faults run ``REPEATS`` times, each back to back with its clean twin
(load drifts): ``clean``, ``read_in_commit``, ``long_plan_delay`` (6 periods, at least 5 ms:
idle ~5/6, clear of its 0.5 gate under load), ``clean_constrained``, ``mask_sync``. Then the
blocking engine's clean run, and each family the attribution module checks once
(``ATTRIBUTED``), sized from the first clean run of its engine. A family's baseline is
the first run of that name.

Nothing reads the engines after the runs: they close here, and the tests only read traces
and reports, so no test can change what another sees.
"""
from __future__ import annotations

from pathlib import Path

from helpers.fault_families import BASELINES, BY_NAME, ENGINES
from helpers.fault_helpers import Runs, Sleep, delay_before, patched, read_in_commit
from photon_trace.workload import Workload, engine_settings, prepare

PLAIN = Workload(streams=16, tokens=64, seed=3)
CONSTRAINED = Workload(streams=16, tokens=64, seed=3, constrained="point", constrained_share=1.0)
REPEATS = 2
ATTRIBUTED = ("read_in_plan", "read_in_stage", "wait_in_plan", "plan_delay", "sync_in_slow_plan", "stage_delay",
              "commit_work", "gc_pause", "stall_outside", "slow_finalize", "blocking_plan_delay")


def traced_fault_runs(out: Path) -> Runs:
    """Every traced run the fault tests look at, in ``out``: ``Runs`` with ``faults`` (family
    name -> the injected fault, its delays' times), ``sleep`` (``long_plan_delay``'s) and
    ``slept`` (per ``long_plan_delay`` run, how long each of its sleeps took)."""
    from photon_trace.engine.engine import Engine

    res = Runs(out)
    res.faults = {}
    sizing = engine_settings(PLAIN)
    pipelined = Engine(model="tiny", backend="cpu", depth=2, **sizing)
    try:
        blocking = Engine(model="tiny", backend="cpu", depth=1, **sizing)
    except BaseException:
        pipelined.close()
        raise
    # the "plain" and "constrained" engines of the families differ only in their workload
    engines = {name: blocking if spec["depth"] == 1 else pipelined for name, spec in ENGINES.items()}
    try:
        prepared = {name: prepare(engines[name], CONSTRAINED if spec["constrained"] else PLAIN)
                    for name, spec in ENGINES.items()}
        _twins(res, pipelined, prepared["plain"], prepared["constrained"])
        res.run(BASELINES["blocking"], blocking, prepared["blocking"])
        period = {name: res.reports(BASELINES[name])[0].mean_period_ms / 1e3 for name in ENGINES}
        for name in ATTRIBUTED:
            fam = BY_NAME[name]
            res.faults[name] = fault = fam.inject(engines[fam.engine], period[fam.engine])
            res.run(name, engines[fam.engine], prepared[fam.engine], fault)
    finally:
        pipelined.close()
        blocking.close()
    return res


def _twins(res: Runs, eng, plain, constrained) -> None:
    """The engine module's faults, each run right after its clean twin, ``REPEATS`` times."""
    sleep = None
    res.slept = []
    for _ in range(REPEATS):
        clean = res.run("clean", eng, plain)
        res.run("read_in_commit", eng, plain, read_in_commit(eng))
        # The delay must exceed the device's work per step or the pipeline hides it:
        # 5 ms, or more when this shared machine makes the device slow.
        sleep = sleep or Sleep(max(0.005, 6 * clean.mean_period_ms / 1e3))  # idle ~5/6: clear of the 0.5 gate under load
        before = len(sleep.took)
        res.run("long_plan_delay", eng, plain, patched(eng.scheduler, "plan", delay_before(sleep)))
        res.slept.append(sleep.took[before:])     # this run's sleeps, as they ran
        res.run("clean_constrained", eng, constrained)
        res.run("mask_sync", eng, constrained, BY_NAME["mask_sync"].inject(eng, 0.0))
    res.sleep = sleep
