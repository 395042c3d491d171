"""``check --baseline`` through the real engine (issue 28 item 5): identical code passes when its
run had two CPU burners beside it, and a real regression (the host 20% of the measured period
slower every step) still fails, naming the period.

The engine is blocking (depth 1), where every host delay is on the step's path, so the
regression is +20% of the period by construction, on a fast machine and a slow one alike. The
burners are two ``yes`` processes this module starts and kills by their own pids."""
from __future__ import annotations

import subprocess

import pytest

from helpers.fault_helpers import Sleep, delay_before, patched
from photon_trace.cli.check import main
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.tracer import TraceLevel
from photon_trace.traced_run import trace_run
from photon_trace.workload import Workload, engine_settings, prepare

WORKLOAD = Workload(streams=8, tokens=64, requests_per_stream=3, seed=5)
ATTEMPTS = 4


@pytest.fixture(scope="module")
def engine():
    from photon_trace.engine.engine import Engine
    eng = Engine(model="tiny", backend="cpu", depth=1, **engine_settings(WORKLOAD))
    try:
        yield eng, prepare(eng, WORKLOAD)
    finally:
        eng.close()


def _run(engine, path, fault=None):
    eng, prepared = engine
    if fault is None:
        trace, _ = trace_run(eng, prepared, path, TraceLevel.ON, analyse=False)
    else:
        with fault:
            trace, _ = trace_run(eng, prepared, path, TraceLevel.ON, analyse=False)
    return trace


def test_identical_code_passes_when_its_run_had_two_cpu_burners_beside_it(engine, tmp_path, capsys):
    # The baseline as CI records it, then the same code's run beside two burners: the machine,
    # not the code, makes the second slower (by 1.7-8x on the 2-core box), and the gate must not
    # call that a regression.
    _run(engine, tmp_path / "r1.trace.jsonl")
    burners = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        _run(engine, tmp_path / "r2.trace.jsonl")
    finally:
        for p in burners:
            p.kill()
            p.wait()
    rc = main([str(tmp_path / "r2.trace.jsonl"), "--baseline", str(tmp_path / "r1.trace.jsonl"), "--max-idle", "1"])
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    assert "period_regression: pass" in out.out


def test_a_host_twenty_percent_slower_every_step_fails_naming_the_period(engine, tmp_path, capsys):
    # A pair the machine made undecidable (another engineer's load kept the engine thread off
    # the CPU most of a run) says so and exits 0; the verdict under test needs a decided pair,
    # so such a pair is run again, up to ATTEMPTS times.
    said = []
    for attempt in range(ATTEMPTS):
        base = _run(engine, tmp_path / f"base{attempt}.trace.jsonl")
        delay = Sleep(0.2 * analyze(base).period_ms / 1e3)
        _run(engine, tmp_path / f"slow{attempt}.trace.jsonl", patched(engine[0].scheduler, "plan", delay_before(delay)))
        assert delay.took, "the delay never ran"
        rc = main([str(tmp_path / f"slow{attempt}.trace.jsonl"), "--baseline", str(tmp_path / f"base{attempt}.trace.jsonl"),
                   "--max-idle", "1"])
        out = capsys.readouterr()
        if "cannot decide" not in out.out:
            break
        said.append(out.out)
    else:   # never decided: the verdict under test was not reached, and the report says why
        pytest.skip(f"the machine stayed too busy to decide in {ATTEMPTS} attempts: {said[-1].splitlines()[0]}")
    assert rc == 1, out.out + out.err
    assert "FAIL" in out.err and "median period" in out.err and "a regression" in out.err
