"""Issue 28, items 3 and 4, through the REAL engine (tiny preset, host-process device), each
fault sized from the clean run's measured period P:

* a device that is sometimes slow: one decode forward in four takes 2 P longer, on the device
  (its worker spins: ``helpers/device_faults.py``). No bubble shows it; the report's device-side
  row must, with the share of device time the worker says it injected, and ``check`` must say it;
* two faults at once: a device read in finalize and a plan 1 P slower. The slow plan must be
  charged the time it held the device idle, not the little the read's charge left it; each
  charge against what removing its fault gave back, A/B within one run, is
  ``test_faults_charging.py``'s.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.code_sites import ROOT
from helpers.device_faults import control, slowable
from helpers.fault_families import BY_NAME, two_faults
from helpers.fault_helpers import GATE, Runs, phase_rows
from photon_trace.telemetry.analysis import Cause
from photon_trace.telemetry.analysis.causes import DEPLOYMENT, who_fixes
from photon_trace.telemetry.analysis.gate import run_check
from photon_trace.workload import Workload, engine_settings, prepare

PLAIN = Workload(streams=16, tokens=64, seed=3)
CONSTRAINED = Workload(streams=16, tokens=64, seed=3, constrained="point", constrained_share=1.0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One engine whose worker can be slowed: its clean runs, the slow-forward run and the
    two-faults run."""
    from photon_trace.engine.engine import Engine

    out = tmp_path_factory.mktemp("device-faults")
    res = Runs(out)
    with slowable() as register:
        eng = Engine(model="tiny", backend="cpu", depth=2, **engine_settings(CONSTRAINED))
        register(eng)
    try:
        plain, constrained = prepare(eng, PLAIN), prepare(eng, CONSTRAINED)
        period = res.run("clean", eng, plain).mean_period_ms / 1e3
        res.slow = BY_NAME["slow_forward"].inject(eng, period)
        res.run("slow_forward", eng, plain, res.slow)
        res.ctl = control(eng)
        period_c = res.run("clean_constrained", eng, constrained).mean_period_ms / 1e3
        res.run("two_faults", eng, constrained, two_faults(eng, period_c))
    finally:
        GATE.set(True)
        eng.close()
    return res


def test_one_slow_forward_in_four_is_a_device_side_row_with_the_injected_share(runs):
    ((trace, rep, _),) = runs["slow_forward"]
    ctl = runs.ctl
    assert ctl.slowed > 0 and ctl.every == 0                      # it ran, and is off again
    injected = ctl.injected_ns / ctl.slowed                       # per slowed forward, as the worker spun
    (clean,) = runs.reports("clean")
    fwd = next(s for s in rep.device_ops if s.op == "forward")
    base = next(s for s in clean.device_ops if s.op == "forward")
    # the worker slowed every 4th decode forward: about a quarter of the window's ran long, and the
    # tail holds at least that (a stall of this busy machine, the worker descheduled for many
    # periods, adds to it: no upper bound that such a stall could not break)
    expected = fwd.count / 4 * injected
    assert fwd.tail_ns >= 0.75 * expected, (fwd, expected)
    # the slow ones are slow by what was injected: their median less the median (medians, which a
    # stall cannot move), within the forward's own spread in the clean run
    spread = base.p90_ns - base.p50_ns
    # and the worker's own waits for a CPU inside the forwards (its run-queue counter, recorded
    # at each op's start and end): beside two burners and a demo they moved the slow ones'
    # median 4.2 ms from the injected spin, against 3.9 ms of clean spread
    queued = runq_shift(trace, fwd)
    assert abs(fwd.slow_p50_ns - fwd.p50_ns - injected) <= 0.25 * injected + spread + queued, \
        (fwd, injected, base, queued)
    (finding,) = [f for f in rep.device_findings if f.op == "forward"]
    device_time = sum(s.total_ns for s in rep.device_ops)
    assert finding.share == fwd.tail_ns / device_time >= 0.75 * expected / device_time
    # how often: about the injected one in four; this machine's own spread moves the forwards around
    # the "slow" line (1.5x the median) both ways (1 in 2.1 to 1 in 5.2 measured under load)
    assert finding.every < 8 and finding.factor >= 1.5, finding
    assert finding.words.startswith(f"forward: 1 step in {finding.every:.0f} takes ")
    # no bubble holds it: no row of the diagnosis names the forward
    assert all(d.site_or_phase != "forward" for d in rep.diagnosis)


def runq_shift(trace, fwd) -> float:
    """How far the run-queue waits inside the slow forwards (at least 1.5x the median) moved
    their median from the others': |median wait of the slow ones - median wait of the rest|."""
    from statistics import median

    from photon_trace.telemetry.analysis.device_spread import SLOW_FACTOR

    ops = [(d.t1 - d.t0, d.runq_t1 - d.runq_t0) for d in trace.device_spans
           if d.op == "forward" and d.runq_t0 >= 0 and d.runq_t1 >= 0]
    slow = [q for dur, q in ops if dur >= SLOW_FACTOR * fwd.p50_ns]
    rest = [q for dur, q in ops if dur < SLOW_FACTOR * fwd.p50_ns]
    return abs(median(slow) - median(rest)) if slow and rest else 0.0


def test_check_without_a_baseline_says_the_device_side_row(runs):
    ((_, rep, path),) = runs["slow_forward"]
    (finding,) = [f for f in rep.device_findings if f.op == "forward"]
    assert f"device-side: {finding.words}" in " ".join(run_check(path).details())
    out = subprocess.run([sys.executable, "-m", "photon_trace.cli", "check", str(path)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode in (0, 1), out.stderr
    assert f"device-side: {finding.words}" in out.stdout, out.stdout


def plan_in_late_gaps(trace, rep) -> int:
    """Independent of the attribution: the time the host spent in plan inside the steady window's
    bubble-sized gaps before the next op was enqueued (the host late, and in plan)."""
    from photon_trace.telemetry.analysis.bubbles import MIN_BUBBLE_NS, device_gaps

    plans = [(h.t0, h.t1) for h in trace.host_spans if h.phase == "plan"]
    total = 0
    for g in device_gaps(trace, rep.window):
        if g.full_ns < MIN_BUBBLE_NS:
            continue
        a, b = g.t0, min(max(g.next.enqueued, g.t0), g.t1)
        total += sum(max(0, min(b, t1) - max(a, t0)) for t0, t1 in plans)
    return total


def test_two_faults_at_once_charge_the_slow_plan_its_time_on_the_critical_path(runs):
    ((trace, rep, _),) = runs["two_faults"]
    fam = BY_NAME["two_faults"]
    rows = {(d.cause, d.site_or_phase): d for d in rep.diagnosis}
    sync = rows[(fam.cause, fam.detail)]
    # the plan's rows, whether or not the host ran in it (a loaded machine descheduled part of
    # the delay): one row of the phase's (``row_of``), charged their sum
    charges = phase_rows(rep)
    plan_charged = charges[(Cause.HOST_BOUND, "plan")]
    # The read leaves the device idle until the host has planned and launched the next step: all
    # the time the host spent in plan while the device waited is the plan's to give back, though
    # the read's charge took most of it in the partition (the issue: 4% of the idle).
    # Removing the plan's delay alone gives that back when the device runs at one speed: each
    # charge against the gain its removal gave, in the same steps of switching runs, is
    # ``test_faults_charging.py``'s; ``test_analysis_charging.py`` checks the rule exactly.
    covered = plan_in_late_gaps(trace, rep)
    assert 0.9 * covered <= plan_charged, (charges, covered)
    # the read keeps its own: its charge is at most its bubbles (the critical path may cap it)
    assert 0 < sync.charged_ns <= sync.idle_ns
    # ranked as reports rank: the machine's own (a worker or host descheduled on a loaded machine) apart
    top_two = sorted((k for k in charges if who_fixes(k[0]) != DEPLOYMENT), key=charges.get, reverse=True)[:2]
    assert set(top_two) == {(sync.cause, sync.site_or_phase), (Cause.HOST_BOUND, "plan")}, charges
