"""The Compare tab's verdicts with intervals (issue 28 item 5): the period, idle fraction,
tokens/s and device times decided by their intervals, "not valid" on a changed machine, and the
cost model for a blocking/pipelined pair whatever the engines' seeds."""
from __future__ import annotations

from dataclasses import replace

from helpers.dashboard_samples import WORKLOAD, report, sample
from helpers.loop_sim import BATCHED_COSTS, SyntheticRun, synthetic_trace

from photon_trace.dashboard.panels import cost_model_pair, figures
from photon_trace.dashboard.panels.compare import NOT_VALID, comparison_of, validity_text
from photon_trace.telemetry.analysis import analyze


def rows(a, b, headers=({}, {})):
    c = comparison_of(a, b, headers)
    return c, {r["metric"]: r for r in figures.compare_rows(a, b, c)}


def test_blocking_against_pipelined_is_decided_by_intervals_and_says_the_machine_held():
    c, r = rows(report("blocking"), report("pipelined"))
    assert c.valid and "did not change" in validity_text(c)
    for metric in ("period", "device idle", "tokens/s", "forward"):
        assert r[metric]["95% interval"], metric
    assert r["device idle"]["verdict"] == "better" and r["forward"]["verdict"] == "no clear change"


def test_a_device_three_times_slower_is_not_a_valid_comparison():
    slow = synthetic_trace(SyntheticRun(depth=2, costs=replace(BATCHED_COSTS, forward_ns=3 * BATCHED_COSTS.forward_ns),
                                        **WORKLOAD))
    c, r = rows(report("pipelined"), analyze(slow))
    assert not c.valid
    assert validity_text(c).startswith("NOT A VALID COMPARISON: the machine changed: forward")
    assert {r[m]["verdict"] for m in ("period", "tokens/s", "forward", "sample")} == {NOT_VALID}
    assert r["accidental syncs"]["verdict"] == "same"        # a count the machine cannot make: still decided


def test_the_cost_model_takes_a_pair_whose_engine_seeds_differ():
    hb, hp = sample("blocking").header, sample("pipelined").header
    hp = {**hp, "settings": {**hp["settings"], "seed": 7}}
    assert cost_model_pair.cost_model_applies(report("blocking"), report("pipelined"), (hb, hp)) == (True, "")
