"""OpenTelemetry export end to end: the standard OTLP/HTTP exporter posts to a real
loopback HTTP receiver that decodes ``ExportTraceServiceRequest``; spans, attributes,
parent/child links and timestamps are checked against the recorded trace."""
from __future__ import annotations

import socket
import time
from collections import defaultdict

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
from photon_trace.telemetry.export.otlp.sink import OtelSink, export_trace  # noqa: E402
from helpers.otlp_receiver import Receiver, attrs  # noqa: E402
from helpers.code_sites import COMMIT_SITE  # noqa: E402
from helpers.loop_sim import (START_NS, WALL_ANCHOR_NS, SyntheticRun,  # noqa: E402
                                              synthetic_trace, synthetic_tracer)

EVERY = 5


def wall(t: int) -> int:
    return t - START_NS + WALL_ANCHOR_NS


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def exported(receiver):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        mp.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-test=photon")
        mp.setenv("OTEL_SERVICE_NAME", "photon-test")
        mp.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        sink = OtelSink(every_n_steps=EVERY, bubble_threshold_ns=10**12)
        tracer = synthetic_tracer(SyntheticRun(steps=30, requests=8, mask_upload_bug=True, constrained_every=4),
                                  sinks=[sink], flush_interval_s=0.01)
        trace = tracer.snapshot()
        tracer.close()
    return trace, sink, receiver.spans()


def test_spans_arrive_over_otlp_http_at_the_standard_path(receiver, exported):
    trace, sink, spans = exported
    assert receiver.posts and all(path == "/v1/traces" for path, _, _ in receiver.posts)
    assert all(h.get("x-test") == "photon" for _, h, _ in receiver.posts)
    assert all(res["service.name"] == "photon-test" and res["photon_trace.backend"] == "synthetic"
               for res, _ in spans)
    assert len(spans) > 50


def test_sampled_steps_are_every_nth_and_every_one_with_an_unexpected_wait(exported):
    trace, sink, spans = exported
    steps = {attrs(s)["photon_trace.step"]: s for _, s in spans if s.name == "step"}
    unexpected = {w.step for w in trace.waits if not w.expected}
    committed = {r.step for r in trace.steps}
    assert unexpected and set(steps) == {i for i in committed if i % EVERY == 0} | unexpected
    for i, s in steps.items():
        a = attrs(s)
        reasons = set(a["photon_trace.sampled_because"].split(","))
        assert ("periodic" in reasons) == (i % EVERY == 0)
        assert ("unexpected_wait" in reasons) == (i in unexpected)
        rec = next(r for r in trace.steps if r.step == i)
        assert (a["photon_trace.rows"], a["photon_trace.step.kind"]) == (rec.rows, rec.kind)
        assert s.parent_span_id == b""


def test_phase_device_and_wait_spans_are_children_with_the_recorded_times(exported):
    trace, sink, spans = exported
    by_id = {s.span_id: s for _, s in spans}
    children = defaultdict(list)
    for _, s in spans:
        if s.parent_span_id:
            assert s.parent_span_id in by_id, f"{s.name}: parent was not exported"
            assert by_id[s.parent_span_id].trace_id == s.trace_id
            children[s.parent_span_id].append(s)
    steps = [s for _, s in spans if s.name == "step"]
    commit_waits = 0
    for step in steps:
        i = attrs(step)["photon_trace.step"]
        kids = {c.name: c for c in children[step.span_id]}
        assert {"plan", "launch", "commit", "device.copy_back"} <= set(kids)
        assert ("finalize" in kids) == (attrs(step)["photon_trace.constrained_rows"] > 0)
        assert "device.forward" in kids or "device.prefill" in kids
        assert {c.name for c in children[kids["launch"].span_id]} == {"stage"}
        assert "stream_out" in {c.name for c in children[kids["commit"].span_id]}
        for c in children[kids["commit"].span_id]:
            if c.name == "host_wait":
                commit_waits += 1
                a = attrs(c)
                assert a["photon_trace.wait.reason"] == "commit: copy-back" and a["photon_trace.wait.expected"]
                path, line = COMMIT_SITE.split(":")
                assert a["code.file.path"] == path and a["code.line.number"] == int(line)
        # times: wall clock = recorded monotonic time through the header's anchor
        launch = next(h for h in trace.host_spans if h.step == i and h.phase == "launch")
        assert (kids["launch"].start_time_unix_nano, kids["launch"].end_time_unix_nano) == \
               (wall(launch.t0), wall(launch.t1))
        cb = next(d for d in trace.device_spans if d.step == i and d.op == "copy_back")
        assert (kids["device.copy_back"].start_time_unix_nano, kids["device.copy_back"].end_time_unix_nano) == \
               (wall(cb.t0), wall(cb.t1))
        assert attrs(kids["device.copy_back"])["photon_trace.stream"] == "copy"
        recs = [h for h in trace.host_spans if h.step == i] + [d for d in trace.device_spans if d.step == i]
        assert step.start_time_unix_nano == wall(min(r.t0 for r in recs))
        assert step.end_time_unix_nano == wall(max(r.t1 for r in recs))
    assert commit_waits > 0
    bad = [s for _, s in spans if s.name == "host_wait" and not attrs(s)["photon_trace.wait.expected"]]
    assert bad and all(by_id[s.parent_span_id].name == "mask_upload" for s in bad)


def test_one_span_per_request_with_gen_ai_attributes_linked_to_its_steps(exported):
    trace, sink, spans = exported
    step_ids = {s.span_id: attrs(s)["photon_trace.step"] for _, s in spans if s.name == "step"}
    reqs = [s for _, s in spans if s.name == "text_completion synthetic-tiny"]
    events = defaultdict(dict)
    for r in trace.requests:
        events[r.req_id][r.event] = r
    assert len(reqs) == sum(1 for e in events.values() if "finalized" in e) > 0
    for span in reqs:
        a = attrs(span)
        e = events[a["photon_trace.request_id"]]
        assert a["gen_ai.operation.name"] == "text_completion"
        assert a["gen_ai.request.model"] == "synthetic-tiny"
        assert a["gen_ai.usage.input_tokens"] == e["arrival"].tokens == 48
        assert a["gen_ai.usage.output_tokens"] == e["finalized"].tokens > 0
        assert a["photon_trace.time_to_first_token_s"] == pytest.approx(
            (e["first_token"].t - e["arrival"].t) / 1e9)
        assert (span.start_time_unix_nano, span.end_time_unix_nano) == \
               (wall(e["arrival"].t), wall(e["finalized"].t))
        assert [ev.name for ev in span.events] == ["admitted", "first_token"]
        assert span.parent_span_id == b""
        linked = [step_ids[link.span_id] for link in span.links]
        assert linked and len(linked) == a["photon_trace.linked_steps"]
        admitted, done = e["admitted"].t, e["finalized"].t
        for i in linked:  # each linked step ran while the request was active
            recs = [h for h in trace.host_spans if h.step == i]
            assert min(h.t0 for h in recs) <= done and max(h.t1 for h in recs) >= admitted


def test_a_bubble_over_the_threshold_samples_the_step():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    blocking = synthetic_trace(SyntheticRun(depth=1, steps=12, constrained_every=0))
    ex = InMemorySpanExporter()
    export_trace(blocking, exporter=ex, every_n_steps=1000, bubble_threshold_ns=100_000)
    steps = [dict(s.attributes) for s in ex.get_finished_spans() if s.name == "step"]
    # blocking: the device idles through every commit + plan, so every step after the first has a bubble
    assert {a["photon_trace.step"] for a in steps if "bubble" in a["photon_trace.sampled_because"]} == \
        set(range(1, 12))
    assert all(a["photon_trace.bubble_ns"] > 100_000 for a in steps if a["photon_trace.step"] > 0)


def test_nothing_breaks_and_close_is_bounded_when_no_collector_listens(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")
    sink = OtelSink(every_n_steps=1, shutdown_timeout_s=1.0)
    tracer = synthetic_tracer(SyntheticRun(steps=10), sinks=[sink], flush_interval_s=0.01)
    t0 = time.monotonic()
    tracer.close()
    assert time.monotonic() - t0 < 3.0
    assert tracer.sink_errors == [] and sink.steps_exported == 10
    assert len(tracer.snapshot().steps) == 10


def test_idle_ticks_plans_do_not_stretch_a_step_span():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from photon_trace.telemetry.trace.records import HostSpan

    trace = synthetic_trace(SyntheticRun(steps=12))
    first = min(h.t0 for h in trace.host_spans)
    # an idle tick before step 5 planned nothing under index 5; so did one after the run
    trace.host_spans.insert(0, HostSpan("plan", 5, -1, first - 50_000, first - 40_000, "scheduler"))
    trace.host_spans.append(HostSpan("plan", 99, -1, first + 10**9, first + 10**9 + 1, "scheduler"))
    ex = InMemorySpanExporter()
    sink = export_trace(trace, exporter=ex, every_n_steps=1)
    spans = ex.get_finished_spans()
    step5 = next(s for s in spans if s.name == "step" and s.attributes["photon_trace.step"] == 5)
    plans = [s for s in spans if s.name == "plan" and s.parent.span_id == step5.context.span_id]
    real = next(h for h in trace.host_spans if h.step == 5 and h.phase == "plan" and h.t0 > first)
    assert len(plans) == 1 and plans[0].start_time == wall(real.t0)
    assert step5.start_time == wall(real.t0)
    assert sink.steps_exported == len(trace.steps)
