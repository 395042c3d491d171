"""Issue 28 item 1, the rules on hand-built traces with exact numbers: host-late time charged to
a phase keeps only its on-CPU share as host code (the rest is ``host_descheduled`` by its
run-queue share, ``host_blocked`` for what is left); an expected wait's time after its copy
landed is never ``commit_wait``; records without counters are attributed as before."""
from __future__ import annotations

from helpers.trace_builder import COMMIT_SITE, US, TraceBuilder
from photon_trace.telemetry.analysis.attribution import Attribution, Part
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.host_running import MIN_NOT_RUNNING_NS

C = Cause


def commit_then_launch(wait_cpu: int = -1, wait_runq: int = -1, commit_cpu: int = -1, commit_runq: int = -1):
    """Step 1's forward ends at 1000 us and its copy lands at 1010 us; the commit waits from 510 to
    2000 us (990 us after the landing), works 100 us, and launch enqueues step 2's forward at 2140."""
    b = TraceBuilder()
    b.compute("forward", 1, 0, 1000 * US, enqueued=0).copy("copy_back", 1, 1000 * US, 1010 * US, enqueued=0)
    b.host("commit", 1, 500 * US, 2100 * US, cpu_ns=commit_cpu, runq_ns=commit_runq)
    b.wait("commit: copy-back", 510 * US, 2000 * US, expected=True, site=COMMIT_SITE, step=1,
           cpu_ns=wait_cpu, runq_ns=wait_runq)
    b.host("launch", 2, 2100 * US, 2145 * US)
    b.compute("forward", 2, 2150 * US, 3000 * US, enqueued=2140 * US)
    trace = b.build()
    prev, nxt = trace.device_spans[0], trace.device_spans[2]
    return Attribution(trace, slack_ns=0, min_gap_ns=20 * US).split(prev, nxt).parts


def us(parts: list[Part]) -> list[tuple]:
    return [(p.t0 // US, p.t1 // US, p.cause, p.detail) for p in parts]


def test_without_counters_the_commit_wait_keeps_all_of_its_time():
    assert us(commit_then_launch()) == [
        (1000, 2000, C.COMMIT_WAIT, COMMIT_SITE), (2000, 2100, C.HOST_BOUND, "commit"),
        (2100, 2140, C.HOST_BOUND, "launch"), (2140, 2150, C.DISPATCH, "launch latency")]


def test_a_commit_wait_after_its_copy_landed_is_descheduled_then_blocked():
    # 900 us in the run queue: the host had its tokens at 1010 and was not running until 2000
    parts = commit_then_launch(wait_cpu=400 * US, wait_runq=900 * US, commit_cpu=500 * US, commit_runq=900 * US)
    assert us(parts) == [
        (1000, 1010, C.COMMIT_WAIT, COMMIT_SITE),            # the copy still on its way
        (1010, 1910, C.HOST_DESCHEDULED, COMMIT_SITE),       # runnable, not running
        (1910, 2000, C.HOST_BLOCKED, COMMIT_SITE),           # off the CPU, not waiting on anything
        (2000, 2100, C.HOST_BOUND, "commit"),                # the phase's own 100 us, all on the CPU
        (2100, 2140, C.HOST_BOUND, "launch"), (2140, 2150, C.DISPATCH, "launch latency")]


def test_without_a_run_queue_counter_the_time_not_running_is_blocked():
    parts = commit_then_launch(wait_cpu=400 * US, wait_runq=-1, commit_cpu=500 * US, commit_runq=-1)
    assert us(parts)[:3] == [(1000, 1010, C.COMMIT_WAIT, COMMIT_SITE), (1010, 2000, C.HOST_BLOCKED, COMMIT_SITE),
                             (2000, 2100, C.HOST_BOUND, "commit")]


def test_a_phase_keeps_its_on_cpu_share_and_gives_the_rest_by_its_run_queue_share():
    # plan: 1000 us, 250 us on the CPU, 500 us runnable; the gap holds its last 800 us
    b = TraceBuilder()
    b.compute("forward", 1, 0, 200 * US, enqueued=0)
    b.host("plan", 2, 0, 1000 * US, cpu_ns=250 * US, runq_ns=500 * US)
    b.compute("forward", 2, 1000 * US, 2000 * US, enqueued=1000 * US)
    trace = b.build()
    parts = Attribution(trace, slack_ns=0, min_gap_ns=20 * US).split(*trace.device_spans).parts
    assert us(parts) == [(200, 400, C.HOST_BOUND, "plan"), (400, 800, C.HOST_DESCHEDULED, "plan"),
                         (800, 1000, C.HOST_BLOCKED, "plan")]


def test_a_phase_not_running_for_less_than_the_noise_floor_stays_host_code():
    b = TraceBuilder()
    b.compute("forward", 1, 0, 200 * US, enqueued=0)
    b.host("plan", 2, 0, 1000 * US, cpu_ns=1000 * US - MIN_NOT_RUNNING_NS, runq_ns=0)
    b.compute("forward", 2, 1000 * US, 2000 * US, enqueued=1000 * US)
    trace = b.build()
    parts = Attribution(trace, slack_ns=0, min_gap_ns=20 * US).split(*trace.device_spans).parts
    assert us(parts) == [(200, 1000, C.HOST_BOUND, "plan")]
