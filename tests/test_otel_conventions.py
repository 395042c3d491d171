"""Request spans follow OpenTelemetry's GenAI semantic conventions, checked against a real
OTLP/HTTP receiver decoding protobuf and the semantic-conventions package's own names; the
resource says which backend and device served; engine idle time is no bubble."""
from __future__ import annotations

import httpx
import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai  # noqa: E402

from photon_trace.engine.engine import Engine  # noqa: E402
from photon_trace.telemetry.export.otlp.sink import OtelSink, export_trace  # noqa: E402
from helpers.otlp_receiver import Receiver, attrs  # noqa: E402
from helpers.serving import serving  # noqa: E402
from helpers.trace_builder import MS, TraceBuilder  # noqa: E402
from helpers.waiting import wait_until  # noqa: E402

TINY = dict(model="tiny", backend="cpu", max_rows=16, max_step_tokens=64, max_seqs=32,
            kv_tokens=2048, page_size=8, max_context=256)
# every gen_ai.* attribute name the conventions define
GEN_AI_NAMES = {v for k, v in vars(gen_ai).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
STANDARD_FINISH = {"stop", "length", "content_filter", "tool_calls", "function_call"}


@pytest.fixture(scope="module")
def served():
    """Requests of each kind through a server exporting to a real OTLP/HTTP receiver."""
    receiver = Receiver()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")      # the batch processor exports within 50 ms
        sink = OtelSink(model="tiny", exporter=OTLPSpanExporter(endpoint=receiver.endpoint + "/v1/traces"))
        with serving(lambda tracer: Engine(tracer=tracer, **TINY), model_name="tiny", sinks=[sink]) as srv:
            with httpx.Client(base_url=srv.url, timeout=60) as c:
                replies = {
                    "length": c.post("/v1/completions", json={
                        "prompt": "Hello", "max_tokens": 12, "ignore_eos": True, "temperature": 0.7,
                        "top_p": 0.9, "top_k": 40, "seed": 7, "stop": ["zzz"]}).json(),
                    "chat": c.post("/v1/chat/completions", json={
                        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 40, "temperature": 0,
                        "response_format": {"type": "regex", "regex": "[a-c]{5}"}}).json(),
                    "point": c.post("/v1/point", json={"object": "cat", "max_objects": 2, "seed": 1}).json(),
                }
            wanted = {r["id"] for r in replies.values()}

            def arrived():
                got = {attrs(s)["gen_ai.response.id"]: (res, s) for res, s in receiver.spans()
                       if "gen_ai.response.id" in attrs(s)}
                return got if wanted <= set(got) else None
            spans = wait_until(arrived, 60, "the request spans at the receiver")
    receiver.close()
    return replies, spans


def test_request_spans_carry_the_gen_ai_attributes(served):
    replies, spans = served
    _, s = spans[replies["length"]["id"]]
    a = attrs(s)
    assert s.name == "text_completion tiny" and s.kind == Span.SPAN_KIND_SERVER
    assert a["gen_ai.operation.name"] == "text_completion" and a["gen_ai.provider.name"] == "photon_trace"
    assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "tiny"
    assert (a["gen_ai.request.max_tokens"], a["gen_ai.request.temperature"], a["gen_ai.request.top_p"],
            a["gen_ai.request.top_k"], a["gen_ai.request.seed"]) == (12, 0.7, 0.9, 40, 7)
    assert a["gen_ai.request.stop_sequences"] == ["zzz"]
    assert a["gen_ai.response.finish_reasons"] == ["length"]
    assert a["gen_ai.usage.input_tokens"] == replies["length"]["usage"]["prompt_tokens"]
    assert a["gen_ai.usage.output_tokens"] == 12
    assert a["gen_ai.output.type"] == "text"


def test_chat_is_chat_and_every_request_says_how_it_finished(served):
    replies, spans = served
    _, chat = spans[replies["chat"]["id"]]
    assert chat.name == "chat tiny" and attrs(chat)["gen_ai.operation.name"] == "chat"
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ["stop"] == \
        [replies["chat"]["choices"][0]["finish_reason"]]
    for _, s in spans.values():
        a = attrs(s)
        assert s.kind == Span.SPAN_KIND_SERVER
        assert a["gen_ai.operation.name"] in {"chat", "text_completion"}
        assert set(a["gen_ai.response.finish_reasons"]) <= STANDARD_FINISH
        assert {k for k in a if k.startswith("gen_ai.")} <= GEN_AI_NAMES, set(a) - GEN_AI_NAMES


def test_a_skill_is_a_text_completion_named_as_such(served):
    replies, spans = served
    _, point = spans[replies["point"]["id"]]
    a = attrs(point)
    assert a["gen_ai.operation.name"] == "text_completion" and a["photon_trace.skill"] == "point"
    assert a["gen_ai.response.finish_reasons"] == [replies["point"]["finish_reason"]]


def test_the_resource_names_the_backend_and_device(served):
    _, spans = served
    for res, _ in spans.values():
        assert res["photon_trace.backend"] == "cpu"
        assert res["photon_trace.device"].startswith("host process")
        assert res["service.name"] == "photon_trace"


def test_engine_idle_time_is_no_bubble():
    """Two requests 3 s apart: the device waited for work, not for the host; only the real
    1 ms gap inside the second request's run is a bubble."""
    b = TraceBuilder()
    t = 0

    def run(first_step: int, req: int, gap_at: int | None = None) -> None:
        nonlocal t
        b.request(req, "arrival", t, 5)
        for i in range(first_step, first_step + 4):
            if i == gap_at:
                t += MS                       # a host-bound bubble inside the run
            b.host("plan", i, t, t + 10_000).host("launch", i, t + 10_000, t + 20_000)
            b.compute("forward", i, t + 20_000, t + 120_000).copy("copy_back", i, t + 120_000, t + 130_000)
            b.host("commit", i, t + 130_000, t + 140_000).step(i, tokens=1)
            t += 140_000
        b.request(req, "finalized", t, 4)

    run(0, 0)
    t += 3_000 * MS                            # nothing to do for 3 s
    run(4, 1, gap_at=6)
    ex = InMemorySpanExporter()
    export_trace(b.build(), exporter=ex, every_n_steps=1000, bubble_threshold_ns=500_000)
    sampled = {s.attributes["photon_trace.step"]: s.attributes for s in ex.get_finished_spans()
               if s.name == "step" and "bubble" in s.attributes["photon_trace.sampled_because"]}
    assert set(sampled) == {6}                 # not step 4, after the idle 3 s
    assert MS <= sampled[6]["photon_trace.bubble_ns"] < 2 * MS
