"""The engine records when it had nothing to run (issue 28 item 2): ``Engine.wait_for_work``
puts the caller's wait for a request into the trace as a ``no_work`` span, at the default
level, and the analysis reads the device's idle there as no work, not as a bubble."""
from __future__ import annotations

import dataclasses
import threading

import pytest

from photon_trace.engine.params import SamplingParams
from photon_trace.telemetry.analysis import OUTSIDE_PHASES, analyze
from photon_trace.telemetry.analysis.window import compute_extent
from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.tracer import NO_WORK, Phase, TraceLevel, now_ns
from photon_trace.traced_run import attached

PARAMS = SamplingParams(max_tokens=8, ignore_eos=True, temperature=0.0, seed=1)


def test_no_work_is_recorded_at_on_and_the_sub_phases_only_at_full():
    on, full = RecordingTracer(TraceLevel.ON, keep=True), RecordingTracer(TraceLevel.FULL, keep=True)
    for tr in (on, full):
        for phase in (Phase.PLAN, Phase.STAGE, Phase.NO_WORK):
            tr.end(phase, 3, -1, tr.begin(phase, 3, -1))
    assert [h.phase for h in on.snapshot().host_spans] == ["plan", NO_WORK]
    assert [h.phase for h in full.snapshot().host_spans] == ["plan", "stage", NO_WORK]
    on.close(), full.close()


def test_an_engine_run_with_a_gap_between_two_submissions_has_a_no_work_span(tiny_engines):
    engine = tiny_engines[2]
    tracer = RecordingTracer(TraceLevel.ON, keep=True, flush_interval_s=None)
    waited: dict[str, int] = {}
    started, release = threading.Event(), threading.Event()

    def wait() -> None:             # a caller's wait for its next request: released by another thread
        waited["t0"] = now_ns()
        started.set()
        assert release.wait(60)
        waited["t1"] = now_ns()

    def releaser() -> None:         # lets the wait go once it is under way: no sleep, no timing
        assert started.wait(60)
        release.set()

    with attached(engine, tracer):
        engine.generate([[5, 6, 7, 8]], PARAMS)
        engine.run_until_idle()     # the pipelined loop's last (zombie) step
        next_step = engine.scheduler.next_step
        threading.Thread(target=releaser, daemon=True).start()
        engine.wait_for_work(wait)
        engine.generate([[9, 10, 11]], PARAMS)
        engine.run_until_idle()
    tracer.close()
    trace = tracer.snapshot()

    (span,) = [h for h in trace.host_spans if h.phase == NO_WORK]
    assert span.step == next_step and span.slot == -1 and span.thread == threading.current_thread().name
    assert span.t0 <= waited["t0"] < waited["t1"] <= span.t1     # the wait, and only as much as around it
    assert min(d.t0 for d in trace.device_spans if d.step >= next_step) > span.t1
    assert max(d.t1 for d in trace.device_spans if d.step < next_step) < span.t0

    rep = analyze(trace, compute_extent(trace))
    assert rep.no_work_ns == span.t1 - span.t0
    assert not [b for b in rep.bubbles if b.t0 < span.t1 and b.t1 > span.t0]   # no bubble inside it
    # without the span, the wait was a host-bound bubble "outside phases": what a server's trace said
    bare = dataclasses.replace(trace, host_spans=[h for h in trace.host_spans if h.phase != NO_WORK])
    (before,) = [b for b in analyze(bare, compute_extent(bare)).bubbles if b.t0 <= waited["t0"] < b.t1]
    assert before.detail == OUTSIDE_PHASES and before.t1 >= waited["t1"]


def test_wait_for_work_refuses_an_engine_with_work(tiny_engines):
    engine = tiny_engines[2]
    engine.add_request([5, 6, 7], PARAMS)
    with pytest.raises(RuntimeError, match="has work"):
        engine.wait_for_work(lambda: None)
    engine.run_until_idle()


def test_no_work_is_no_part_of_any_steps_otlp_span():
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from helpers.loop_sim import START_NS, WALL_ANCHOR_NS, SyntheticRun, synthetic_trace
    from photon_trace.telemetry.export.otlp.sink import export_trace
    from photon_trace.telemetry.trace.records import HostSpan

    trace = synthetic_trace(SyntheticRun(steps=12))
    first = min(h.t0 for h in trace.host_spans)
    # the engine slept before step 5 (its no_work names the step it will run next), and after the run
    trace.host_spans.insert(0, HostSpan(NO_WORK, 5, -1, first - 900_000, first - 50_000, "scheduler"))
    trace.host_spans.append(HostSpan(NO_WORK, 12, -1, first + 10**9, first + 2 * 10**9, "scheduler"))
    ex = InMemorySpanExporter()
    sink = export_trace(trace, exporter=ex, every_n_steps=1)
    spans = ex.get_finished_spans()
    step5 = next(s for s in spans if s.name == "step" and s.attributes["photon_trace.step"] == 5)
    real = min(h.t0 for h in trace.host_spans if h.step == 5 and h.phase != NO_WORK)
    assert step5.start_time == real - START_NS + WALL_ANCHOR_NS    # not stretched back over the sleep
    assert not [s for s in spans if s.name == NO_WORK]
    assert sink.steps_exported == len(trace.steps)
