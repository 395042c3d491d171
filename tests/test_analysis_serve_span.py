"""The server loop's time between ticks (a ``serve`` span, ``server/between_ticks.py``) is split
by whether the host ran, as a phase is (issue 28 item 2, on a busy machine): only its on-CPU
share stays host code "outside phases (in serve)"; its run-queue share is ``host_descheduled``
and the rest ``host_blocked``. Hand-built traces with exact numbers."""
from __future__ import annotations

from helpers.trace_builder import US, TraceBuilder
from photon_trace.telemetry.analysis.attribution import Attribution, Part
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.tracer import Phase

C = Cause
SERVE = Phase.SERVE.span_name
IN_SERVE = "outside phases (in serve)"


def between_ticks(cpu_ns: int = -1, runq_ns: int = -1) -> list[Part]:
    """Step 1's forward ends at 200 us; the loop's serve span runs 0..1000 us (its last 800 us in
    the gap), then plan and launch enqueue step 2's forward at 1040 us."""
    b = TraceBuilder()
    b.compute("forward", 1, 0, 200 * US, enqueued=0)
    b.host(SERVE, 1, 0, 1000 * US, cpu_ns=cpu_ns, runq_ns=runq_ns)
    b.host("plan", 2, 1000 * US, 1020 * US)
    b.host("launch", 2, 1020 * US, 1045 * US)
    b.compute("forward", 2, 1050 * US, 2000 * US, enqueued=1040 * US)
    trace = b.build()
    return Attribution(trace, slack_ns=0, min_gap_ns=20 * US).split(*trace.device_spans).parts


def us(parts: list[Part]) -> list[tuple]:
    return [(p.t0 // US, p.t1 // US, p.cause, p.detail) for p in parts]


def test_a_serve_span_keeps_its_on_cpu_share_and_gives_the_rest_by_its_run_queue_share():
    # 1000 us: 250 us on the CPU, 500 us runnable (the machine ran something else), 250 us off it
    assert us(between_ticks(cpu_ns=250 * US, runq_ns=500 * US))[:3] == [
        (200, 400, C.HOST_BOUND, IN_SERVE), (400, 800, C.HOST_DESCHEDULED, IN_SERVE),
        (800, 1000, C.HOST_BLOCKED, IN_SERVE)]
    # without counters (an older recorder): all host code outside the phases, as before
    assert us(between_ticks())[0] == (200, 1000, C.HOST_BOUND, IN_SERVE)
