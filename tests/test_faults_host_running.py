"""Issue 28 item 1 through the REAL engine (tiny preset, host-process device): device idle while
the host thread was not running reads ``host_descheduled`` or ``host_blocked``, never the
expected commit wait or host code.

* A CPU burner (``yes``) pinned to the core the engine's host thread runs on, that thread at
  nice 19: it is runnable but the machine runs something else, through its waits and phases.
* Two CPU burners beside a clean run, wherever the OS puts them: the idle while the host was
  descheduled is said beside the gate's figure, not counted in it, and no host-code row holds it.
* Another Python thread holding the GIL: at every 4th commit wait a thread holds it for 3
  measured periods (P, from the clean run of the same engine), so the engine thread, its copy
  landed, waits for the interpreter. (1.5 P, the issue's size, was hidden by the step the
  pipeline had queued: no host-late idle at all in the hog's windows in two runs out of two.)

Nothing here depends on the machine's speed: the hog is sized from P, the burner takes half
the host's core whatever its speed, and the verdicts compare idle charged to one cause with
idle charged to another in the same run.
"""
from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import defaultdict

import pytest

from helpers.fault_helpers import Runs, patched
from photon_trace.telemetry.analysis import Cause
from photon_trace.telemetry.analysis.causes import HOST_CODE, who_fixes
from photon_trace.telemetry.analysis.diagnosis import ranked
from photon_trace.telemetry.analysis.gate import DEFAULT_MAX_IDLE_FRACTION, descheduled_fraction, run_check
from photon_trace.telemetry.tracer import now_ns
from photon_trace.workload import Workload, engine_settings, prepare

WORKLOAD = Workload(streams=8, tokens=48, seed=3)
NOT_RUNNING = (Cause.HOST_DESCHEDULED, Cause.HOST_BLOCKED)


def _timed(fn) -> float:
    """``fn``'s CPU time on this thread: a probe descheduled mid-way on a busy machine would
    read long on the wall clock and make the hog short (once it hid behind the queued step
    entirely: no host-late idle at all in its windows)."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


class GilHog:
    """At every ``n``-th call, start a thread that holds the GIL for ``seconds``; ``spans`` keeps
    when each ran. A pure-Python loop is not enough: the interpreter hands the GIL to a waiting
    thread every switch interval (5 ms), and once the engine thread got it back between two
    bytecodes, its wait saw no lateness at all. One C call (``sum`` over a ``range``) holds it
    to the end; its length is calibrated here, on this machine, from a short one's CPU time."""

    def __init__(self, n: int, seconds: float) -> None:
        self.n, self.seconds, self.calls = n, seconds, 0
        self.spans: list[tuple[int, int]] = []
        self.threads: list[threading.Thread] = []
        probe = 200_000
        took = min(_timed(lambda: sum(range(probe))) for _ in range(5))
        self.items = max(probe, int(seconds / took * probe))

    def _burn(self) -> None:
        t0 = now_ns()
        sum(range(self.items))          # one C call: the GIL is not given up until it returns
        self.spans.append((t0, now_ns()))

    def __call__(self) -> None:
        self.calls += 1
        if self.calls % self.n == 0:
            t = threading.Thread(target=self._burn, name="gil-hog", daemon=True)
            self.threads.append(t)
            t.start()


def hog_at_commit_wait(eng, hog: GilHog):
    def wrap(wait_copied):
        def hogged(slot, step, **kw):
            hog()
            return wait_copied(slot, step, **kw)
        return hogged
    return patched(eng.device, "wait_copied", wrap)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from photon_trace.engine.engine import Engine

    res = Runs(tmp_path_factory.mktemp("host_running"))
    eng = Engine(model="tiny", backend="cpu", depth=2, **engine_settings(WORKLOAD))
    burner = None
    try:
        prepared = prepare(eng, WORKLOAD)
        clean = res.run("clean", eng, prepared)
        period_s = clean.mean_period_ms / 1e3
        res.hog = GilHog(4, 3 * period_s)
        res.run("gil_hog", eng, prepared, hog_at_commit_wait(eng, res.hog))
        for t in res.hog.threads:
            t.join()
        host_cpus = os.sched_getaffinity(0)          # the engine left the device worker's core out
        burner = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
        os.sched_setaffinity(burner.pid, {min(host_cpus)})
        _on_burners_core(lambda: res.run("burner_on_host_core", eng, prepared), min(host_cpus))
        burner.kill()
        burner.wait()
        burner = None
        burners = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
        try:
            res.run("beside_two_burners", eng, prepared)
        finally:
            for b in burners:
                b.kill()
                b.wait()
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
        eng.close()
    return res


def _on_burners_core(run, cpu: int) -> None:
    """``run()`` on a thread of its own on the burner's core, at nice 19 (the burner at 0). At
    the same nice a thread that sleeps in every commit wait is woken ahead of the burner and
    runs its phases out within its slice (EEVDF, Linux 6.18: no host-late idle at all in two
    runs of two); at nice 19 it gets ~1.5% of the core when both are runnable (at 10, ~10%: descheduled under host code in one run of three), so it is runnable
    but not running through its phases and waits, on any machine. Its own thread because an
    unprivileged thread cannot lower its nice again: the test session's goes on at 0."""
    failed: list[BaseException] = []

    def body() -> None:
        os.sched_setaffinity(0, {cpu})
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            run()
        except BaseException as e:   # re-raised on the test's thread
            failed.append(e)

    t = threading.Thread(target=body, name="engine-on-burners-core")
    t.start()
    t.join()
    if failed:
        raise failed[0]


def idle_by_cause(report, inside: list[tuple[int, int]] | None = None) -> dict[Cause, int]:
    """Bubble idle per cause in the window (only the part inside ``inside``'s spans, if given)."""
    out: dict[Cause, int] = defaultdict(int)
    for b in report.bubbles:
        if inside is None:
            out[b.cause] += b.duration_ns
        else:
            out[b.cause] += sum(max(0, min(b.t1, t1) - max(b.t0, t0)) for t0, t1 in inside)
    return out


def test_a_host_sharing_its_core_with_a_burner_is_descheduled_not_waiting_by_design(runs):
    (rep,) = runs.reports("burner_on_host_core")
    idle = idle_by_cause(rep)
    assert idle[Cause.HOST_DESCHEDULED] > idle[Cause.COMMIT_WAIT], dict(idle)
    assert idle[Cause.HOST_DESCHEDULED] > idle[Cause.HOST_BOUND], dict(idle)
    # what to fix first among the host-late rows is not the commit wait ("pipeline it")
    late = [d for d in rep.diagnosis if not Cause(d.cause).queued]
    assert late[0].cause == Cause.HOST_DESCHEDULED, late[:4]


def test_another_thread_holding_the_gil_reads_host_blocked_or_descheduled(runs):
    (rep,) = runs.reports("gil_hog")
    assert runs.hog.spans, "the hog never ran"
    idle = idle_by_cause(rep, runs.hog.spans)
    not_running = sum(idle[c] for c in NOT_RUNNING)
    assert not_running > idle[Cause.COMMIT_WAIT] + idle[Cause.HOST_BOUND], dict(idle)




def test_beside_two_burners_the_gate_counts_no_descheduling_as_host_code(runs):
    """The host or its device worker descheduled is said beside the gated idle, not counted in
    it, and what is left for host code is under the gate's limit."""
    ((trace, rep, _),) = runs["beside_two_burners"]
    result = run_check(trace)
    desched = descheduled_fraction(rep)
    idle = next(g for g in result.gates if g.name == "idle_fraction")
    assert idle.value == pytest.approx(rep.idle_fraction - desched)
    assert desched == 0 or "descheduled" in idle.message, idle.message
    host_code = sum(d.idle_ns for d in rep.diagnosis if who_fixes(d.cause) == HOST_CODE) / rep.window_ns
    assert host_code <= DEFAULT_MAX_IDLE_FRACTION, ranked(rep.diagnosis)[:4]
