"""The observed-gain measure of ``benchmarks/bench_attribution.py``: one engine switching a
fault (or its loop) on and off in blocks (``benchmarks/interleave.py``), and the gate the
fault families are switched by (``helpers.fault_helpers.GATE``)."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from helpers.code_sites import ROOT
from helpers.fault_families import BY_NAME
from helpers.fault_helpers import GATE, patched, replaced

sys.path.insert(0, str(ROOT / "benchmarks"))
from interleave import compare, depth_switch, matched, run_alternating  # noqa: E402


def test_each_block_with_the_fault_is_compared_with_its_neighbours_so_a_linear_drift_cancels():
    # periods grow by 2% a block (the sequences lengthen); blocks with the fault take 1.25x
    blocks = []
    for k in range(9):
        base = 100 * (1 + 0.02 * k)
        on = k % 2 == 1
        blocks.append((on, [base * (1.25 if on else 1.0)] * 6))
    pairs = matched(blocks)
    assert len(pairs) == 4                                  # every interior block with the fault
    assert compare(pairs).ratio == pytest.approx(1.25)
    assert compare(pairs).low == pytest.approx(1.25) and compare(pairs).high == pytest.approx(1.25)


def test_a_block_is_compared_over_the_positions_it_and_both_neighbours_have():
    blocks = [(False, [10, 10, 10, 10, 99]), (True, [20, 20, 20, 20]), (False, [10, 10, 10, 10, 10])]
    assert matched(blocks) == [(80.0, 40.0)]
    assert matched([(False, [1, 1, 1]), (True, [2, 2, 2]), (False, [1, 1, 1])]) == []   # too short to compare
    with pytest.raises(ValueError, match="no block"):
        compare([])


def test_the_gate_switches_a_patched_fault_and_a_replaced_value():
    target = SimpleNamespace(f=lambda: "original", setting="clean")
    try:
        with patched(target, "f", lambda original: (lambda: "faulty")), replaced(target, "setting", "faulty"):
            assert (target.f(), target.setting) == ("faulty", "faulty")
            GATE.set(False)
            assert (target.f(), target.setting) == ("original", "clean")
            GATE.set(True)
            assert (target.f(), target.setting) == ("faulty", "faulty")
        assert (target.f(), target.setting) == ("original", "clean")
        with patched(target, "f", lambda original: (lambda: "always"), gated=False):
            GATE.set(False)
            assert target.f() == "always"                   # a family's baseline part stays
    finally:
        GATE.set(True)


@pytest.fixture(scope="module")
def engine():
    from photon_trace.engine.engine import Engine
    from photon_trace.workload import Workload, engine_settings, prepare

    wl = Workload(streams=4, tokens=160, seed=5)
    eng = Engine(model="tiny", backend="cpu", **engine_settings(wl), depth=2)
    try:
        yield eng, prepare(eng, wl)
    finally:
        eng.close()


def test_switching_between_the_blocking_and_the_pipelined_loop_keeps_every_token(engine, tmp_path):
    from photon_trace.traced_run import trace_run

    eng, prepared = engine
    _, plain = trace_run(eng, prepared, tmp_path / "plain.trace.jsonl", analyse=False)
    for start_on in (False, True):
        run = run_alternating(eng, prepared, tmp_path / f"switched-{start_on}.trace.jsonl", depth_switch(eng),
                              ticks=3, skip=0, start_on=start_on, rest_on=False)
        assert run.digest == plain["outputs_digest"]        # the same tokens, each loop committing in order
        assert eng.config.depth == 2 and eng.idle            # left pipelined, nothing in flight,
        assert "plan" not in vars(eng.scheduler)             # no turn to blocking pending


def test_a_switched_fault_acts_only_in_its_blocks_and_is_gone_afterwards(engine, tmp_path):
    eng, prepared = engine
    fault = BY_NAME["read_in_plan"].inject(eng, 0.0)
    reads, ticks = [], 8       # >= 6 step starts a block (a step starts up to one tick after its launch)
    read = eng.device.read_token_sync
    eng.device.read_token_sync = lambda *a: reads.append(a) or read(*a)
    steps0 = eng.steps
    try:
        run = run_alternating(eng, prepared, tmp_path / "read.trace.jsonl", GATE.set, fault, ticks=ticks, skip=1)
    finally:
        del eng.device.read_token_sync
    assert GATE.on and "plan" not in vars(eng.scheduler)  # the gate rests on; the fault is uninstalled
    steps = eng.steps - steps0
    assert abs(len(reads) - steps / 2) <= ticks + 2         # every other block of ticks read, starting off
    assert len(run.pairs) >= 2, run.pairs                   # blocks with the fault had neighbours to compare
                                                            # (~110 steady steps: 6 such blocks)
