"""Issue 28 item 3 through the REAL engine (tiny preset, host-process device): two faults at
once, a device read in finalize and a plan 1 P slower (P the clean run's measured period), each
row charged what removing its fault alone gives back.

What removing a fault gives back is measured, not assumed: one engine runs the workload
switching that fault on and off every 13 ticks with the other left on
(``benchmarks/interleave.py``), and each block with it is compared with its neighbours without
it. The charge is read in the same steps (``benchmarks/charge_ab.py``): nothing between runs
moves one against the other. Each verdict comes with its interval: within 1 +- 25% of the period
given back, outside it, or the data cannot decide: the ratio's interval straddles an edge of the
band, or the machine changed (the host-process worker shares the host's two cores: removing a
fault that slept gives them back to the engine's other work, and on a loaded machine the device
runs slower and the host waits longer for a core, ``charge_ab``). On this shared machine that
happens; the rows that decide are still checked, and the test then says why and skips.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

from helpers.code_sites import ROOT
from helpers.fault_families import BY_NAME, two_faults
from helpers.fault_helpers import GATE, Runs, row_of
from photon_trace.telemetry.analysis import Cause
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.workload import Workload, engine_settings, prepare

sys.path.insert(0, str(ROOT / "benchmarks"))
from charge_ab import UNDECIDED, WITHIN, compared, decide, step_rows  # noqa: E402
from interleave import run_alternating  # noqa: E402

# long enough for ~15 blocks of 13 ticks in the steady window, twice per fault
CONSTRAINED = Workload(streams=16, tokens=256, seed=3, constrained="point", constrained_share=1.0)
FAM = BY_NAME["two_faults"]
ROWS = {"read": (FAM.cause, FAM.detail), "plan": (Cause.HOST_BOUND, "plan")}
RUNS_PER_FAULT = 2


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    """Per fault ("read", "plan"): the compared blocks of its switching runs (the other fault on),
    each with the charge of its row (``charge_ab.compared``), pooled over the runs."""
    from photon_trace.engine.engine import Engine

    out = tmp_path_factory.mktemp("two-faults")
    eng = Engine(model="tiny", backend="cpu", depth=2, **engine_settings(CONSTRAINED))
    res: dict[str, list] = {}
    try:
        prepared = prepare(eng, CONSTRAINED)
        period = Runs(out).run("clean_constrained", eng, prepared).mean_period_ms / 1e3
        for i in range(RUNS_PER_FAULT):
            for name, row in ROWS.items():
                run = run_alternating(eng, prepared, out / f"{name}-{i}.trace.jsonl", GATE.set,
                                      two_faults(eng, period, switched=name), start_on=bool(i % 2))
                rows = step_rows(load_trace(run.path), run.blocks, [lambda k, row=row: row_of(*k) == row])
                res.setdefault(name, []).append(compared(rows))
    finally:
        GATE.set(True)
        eng.close()
    return {name: np.concatenate([v for v in runs if len(v)]) for name, runs in res.items()}


def test_two_faults_at_once_are_each_charged_what_removing_it_gave_back(blocks):
    verdicts = {name: decide(blocks[name], 0) for name in ROWS}
    said = "; ".join(f"{name}: {v.why}" for name, v in verdicts.items())
    print(f"\ntwo faults at once: {said}")   # the figures behind the verdicts, for -s and the logs
    # each fault mattered: its removal gave back a gain the data resolve (else nothing to compare)
    for v in verdicts.values():
        assert v.period_gain[1] > 0 or v.idle_gain[1] > 0, said
    # every row the data decide is within the band (before, the read was charged a tenth of its gain)
    assert all(v.verdict in (WITHIN, UNDECIDED) for v in verdicts.values()), said
    if any(v.verdict == UNDECIDED for v in verdicts.values()):
        pytest.skip(f"the data cannot decide every row ±25% on this machine now: {said}")
