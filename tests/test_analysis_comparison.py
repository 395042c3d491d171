"""Two runs compared with intervals (issue 28 item 5): a verdict only where the interval and the
band decide, and no verdict at all when the device's own speed changed between the runs.

The rules on step tables written by hand (every number derivable), then through the gate on
simulated traces (``helpers.loop_sim``, seeded jitter)."""
from __future__ import annotations

import dataclasses

import numpy as np

from helpers.loop_sim import MS, US, LoopCosts, SyntheticRun, synthetic_trace
from photon_trace.telemetry.analysis import StepStats, analyze
from photon_trace.telemetry.analysis.comparison import NO_CLEAR_CHANGE, compare
from photon_trace.telemetry.analysis.gate import EXIT_FAIL, EXIT_PASS, UNDECIDED, run_check
from photon_trace.telemetry.analysis.intervals import compare_stat, median

BASE = analyze(synthetic_trace(SyntheticRun(steps=None, streams=4, requests=4, output_tokens=(40,),
                                            arrival_gap_ns=0, constrained_every=0, jitter=0.0)))


def with_steps(periods_ms, forward_ms=2.0, idle_ms=0.0):
    """BASE with its steps replaced: one decode step per period, the given forward and idle."""
    forwards = forward_ms if np.ndim(forward_ms) else [forward_ms] * len(periods_ms)
    steps = [StepStats(i, "decode", 4, int(f * MS), 200 * US, int(p * MS), 300 * US, int(idle_ms * MS), 30 * US, 0, 4)
             for i, (p, f) in enumerate(zip(periods_ms, forwards))]
    return dataclasses.replace(BASE, steps=steps)


def test_the_bootstrap_interval_is_seeded_and_holds_the_point():
    rng = np.random.default_rng(5)
    a, b = rng.normal(3.0, 0.3, 400), rng.normal(3.3, 0.3, 400)
    d1, r1 = compare_stat(a, b, median)
    d2, r2 = compare_stat(a, b, median)
    assert (d1, r1) == (d2, r2)                                  # the same runs, the same interval
    assert d1.low <= d1.point <= d1.high and r1.low <= r1.point <= r1.high
    assert d1.excludes(0.0) and r1.excludes(1.0)                 # a 10% shift over 400 steps is clear


def test_a_shift_beyond_the_band_whose_interval_excludes_zero_is_a_verdict():
    a = with_steps([2.0, 2.4] * 100)                                   # median 2.2
    b = with_steps([2.6, 3.0] * 100)                                   # median 2.8, +27%, no step overlaps
    period = compare(a, b).get("period")
    assert period.delta.excludes(0.0) and period.delta.point > period.band
    assert period.verdict == "worse" and compare(b, a).get("period").verdict == "better"


def test_a_shift_beyond_the_band_inside_the_runs_own_spread_is_no_verdict():
    # 12 steps spread 1.5-3.5 ms: the medians differ by 10% (beyond the 5% band), yet moving a
    # few steps moves a median that much: the interval holds 0
    a = with_steps([1.5, 3.5, 1.6, 3.4, 1.7, 2.0, 3.3, 1.8, 3.2, 1.9, 3.1, 2.1])
    b = with_steps([1.7, 3.5, 1.8, 3.4, 1.9, 2.2, 3.3, 2.0, 3.2, 2.1, 3.1, 2.3])
    period = compare(a, b).get("period")
    assert abs(period.delta.point) > period.band and not period.delta.excludes(0.0)
    assert period.verdict == NO_CLEAR_CHANGE


def test_a_clear_shift_inside_the_band_is_no_verdict():
    a = with_steps([2.0] * 200)
    b = with_steps([2.06] * 200)                                       # +3%: the interval is a point
    period = compare(a, b).get("period")
    assert period.delta.excludes(0.0) and period.verdict == NO_CLEAR_CHANGE


def test_a_device_that_changed_speed_makes_the_comparison_not_valid():
    a = with_steps([3.3] * 200, forward_ms=3.3)
    b = with_steps([12.22] * 200, forward_ms=12.2)
    c = compare(a, b)
    assert not c.valid and [d.key for d in c.machine_changed] == ["forward"]
    assert c.why_not.startswith("the machine changed: forward 3.30 ms -> 12.20 ms")
    # within the device's band it is valid, and the period's growth the device explains is no verdict
    c = compare(a, with_steps([3.5] * 200, forward_ms=3.5))
    assert c.valid and c.get("period").verdict == NO_CLEAR_CHANGE


def test_different_workloads_claim_no_machine_change():
    a = with_steps([3.3] * 200, forward_ms=3.3)
    b = dataclasses.replace(with_steps([12.2] * 200, forward_ms=12.2), settings={**BASE.settings, "streams": 64})
    c = compare(a, b)
    assert c.valid and not c.same_workload and c.get("period").verdict == "worse"


def sim(seed: int, **kw) -> object:
    kw = {"steps": None, "streams": 4, "requests": 4, "output_tokens": (120,), "arrival_gap_ns": 0,
          "constrained_every": 0, "jitter": 0.2, "seed": seed, **kw}
    return synthetic_trace(SyntheticRun(**kw))


def test_the_gate_passes_two_runs_that_differ_by_noise_and_fails_a_host_regression():
    base = sim(1, depth=1)
    r = run_check(sim(2, depth=1), base, max_idle_fraction=1.0)
    assert r.exit_code == EXIT_PASS, r.summary()
    assert {g.name for g in r.gates} >= {"period_regression", "idle_regression"}
    r = run_check(sim(2, depth=1, plan_delay_ns=600 * US), base, max_idle_fraction=1.0)   # +20% of the period
    assert r.exit_code == EXIT_FAIL and {g.name for g in r.failures} == {"period_regression", "idle_regression"}
    assert "median period" in r.summary() and "a regression" in r.summary()


def test_the_gate_cannot_decide_when_the_device_changed_and_says_so():
    base = sim(1)
    r = run_check(sim(2, costs=LoopCosts(forward_ns=4 * MS)), base, max_idle_fraction=1.0)
    assert r.exit_code == EXIT_PASS and r.undecided.startswith("the machine changed: forward")
    assert f"{UNDECIDED} against the baseline: the machine changed" in r.summary()
    assert all(g.message.startswith(UNDECIDED) for g in r.gates if g.name.endswith("_regression"))


def test_a_host_regression_the_device_change_cannot_explain_still_fails():
    # the device 25% faster, the host's plan 3 ms slower a step: the period grew by far more than any
    # machine change could make it (a faster device only shortens it), so the gate decides; the same
    # runs with the plan unchanged are a device change only: no verdict
    base = sim(1, depth=1)
    faster = LoopCosts(forward_ns=int(1.5 * MS))
    r = run_check(sim(2, depth=1, costs=dataclasses.replace(faster, plan_ns=3 * MS)), base, max_idle_fraction=1.0)
    assert r.exit_code == EXIT_FAIL and "period_regression" in {g.name for g in r.failures}, r.summary()
    assert "beyond what the device's own change explains" in r.summary()
    r = run_check(sim(2, depth=1, costs=faster), base, max_idle_fraction=1.0)
    assert r.exit_code == EXIT_PASS and r.undecided.startswith("the machine changed: forward"), r.summary()


def test_a_run_whose_engine_thread_mostly_waited_for_a_cpu_is_too_busy_to_compare():
    a, b = with_steps([2.0, 2.4] * 100), with_steps([2.6, 3.0] * 100)
    quiet = {"cpu_ns": 900, "runq_ns": 5, "wall_ns": 1000, "load_avg": [0.4, 0.3, 0.2], "cpus": 2}
    burned = {**quiet, "runq_ns": 970, "load_avg": [4.1, 3.0, 2.0]}
    assert compare(a, b, host_runs=(quiet, quiet)).valid
    c = compare(a, b, host_runs=(quiet, burned))
    assert not c.valid and c.why_not.startswith("the machine was too busy: run B's engine thread waited for a CPU "
                                                "97% of the run (load average 4.1 on 2 CPUs)")
    assert compare(a, b, host_runs=(None, None)).valid          # a trace that does not say claims nothing


def test_check_exits_0_when_it_cannot_decide_or_the_code_ci_asks_for(tmp_path, capsys):
    from photon_trace.cli.check import main
    from photon_trace.telemetry.trace.file import write_trace
    base = write_trace(sim(1), tmp_path / "base.trace.jsonl")
    moved = write_trace(sim(2, costs=LoopCosts(forward_ns=4 * MS)), tmp_path / "moved.trace.jsonl")
    args = [str(moved), "--baseline", str(base), "--max-idle", "1"]
    assert main(args) == EXIT_PASS
    assert "cannot decide against the baseline: the machine changed: forward" in capsys.readouterr().out
    assert main(args + ["--undecided-exit", "3", "--markdown", str(tmp_path / "check.md")]) == 3
    assert "**Cannot decide against the baseline:** `the machine changed: forward" in (tmp_path / "check.md").read_text()
    assert main([str(base), "--baseline", str(base), "--max-idle", "1", "--undecided-exit", "3"]) == EXIT_PASS
