"""Streaming, disconnects, /metrics and the live trace against a real uvicorn server on loopback
(tiny preset, CPU backend)."""
from __future__ import annotations

import json
import math
import socket

import httpx
import pytest

from photon_trace.engine.engine import Engine
from helpers.serving import metric_samples, serving, sse_data, wait_idle as wait_idle_at
from helpers.waiting import wait_until

# The whole context of the tiny preset: a request can be made long enough to outlast what a
# test does while it runs (see ``lasting_tokens``).
TINY = dict(model="tiny", backend="cpu", max_rows=16, max_step_tokens=64, max_seqs=32,
            kv_tokens=4096, page_size=8, max_context=1024)


@pytest.fixture(scope="module")
def exported():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
def otel(exported):
    from photon_trace.telemetry.export.otlp.sink import OtelSink
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")    # spans reach the exporter within 50 ms
        yield OtelSink(exporter=exported, model="tiny")


@pytest.fixture(scope="module")
def server(otel):
    with serving(lambda tracer: Engine(tracer=tracer, **TINY), model_name="tiny", sinks=[otel]) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def engine_of(server) -> Engine:
    return server.app.state.server.loop.engine


def wait_idle(client, timeout_s: float = 60.0) -> dict:
    return wait_idle_at(str(client.base_url).rstrip("/"), timeout_s)


def lasting_tokens(client, seconds: float = 5.0) -> int:
    """How many tokens keep one request running for ``seconds`` on this machine (measured now),
    within the context: tests that act on a running request size it with this, so a fast
    machine cannot finish it before the test has acted."""
    r = client.post("/v1/completions", json={"prompt": "measure", "max_tokens": 32, "ignore_eos": True}).json()
    tpot = max(r["photon_trace"]["metrics"]["tpot_s"], 1e-6)
    return min(TINY["max_context"] - 16, max(200, math.ceil(seconds / tpot)))


def stream(client, path: str, body: dict) -> list[dict | str]:
    with client.stream("POST", path, json={**body, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        data = sse_data(r.iter_lines())
    return [d if d == "[DONE]" else json.loads(d) for d in data]


def metrics(client) -> dict[str, float]:
    """Every sample of /metrics by name and labels, parsed with prometheus_client's parser."""
    return metric_samples(str(client.base_url).rstrip("/"))


def test_chunks_arrive_while_the_request_is_still_running(client):
    body = {"prompt": "incremental", "max_tokens": lasting_tokens(client), "ignore_eos": True, "seed": 1,
            "stream": True}
    with client.stream("POST", "/v1/completions", json=body) as r:
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        # the first chunk is here; the engine is still generating the others (seconds of them)
        assert client.get("/health").json()["running"] == 1
        rest = sse_data(lines)
    assert json.loads(first[6:])["choices"][0]["finish_reason"] is None
    assert rest[-1] == "[DONE]"


def test_final_chunk_and_done(client):
    events = stream(client, "/v1/completions", {"prompt": "Hello", "max_tokens": 24, "ignore_eos": True,
                                                "seed": 2, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    usage, final, chunks = events[-2], events[-3], events[:-3]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 24
    assert final["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    assert len({e["id"] for e in events[:-1]}) == 1
    assert all(e["object"] == "text_completion" for e in events[:-1])


@pytest.mark.parametrize("extra", [
    {"temperature": 0.9, "seed": 11, "max_tokens": 64, "ignore_eos": True},
    {"temperature": 0.0, "max_tokens": 48},
    {"temperature": 1.0, "seed": 5, "max_tokens": 64,
     "response_format": {"type": "regex", "regex": "[a-z ]{40,60}"}},
], ids=["sampled", "greedy", "regex"])
def test_streamed_text_equals_the_non_streamed_text(client, extra):
    body = {"prompt": "Once upon a time", **extra}
    whole = client.post("/v1/completions", json=body).json()
    events = stream(client, "/v1/completions", body)
    text = "".join(e["choices"][0]["text"] for e in events[:-1])
    assert text == whole["choices"][0]["text"]
    assert events[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_stop_string_is_cut_the_same_way_streamed_and_not(client):
    body = {"prompt": "Words:", "temperature": 1.0, "seed": 9, "max_tokens": 60,
            "response_format": {"type": "regex", "regex": "[a-z]{60}"}}
    full = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
    stop = full[20:23]                          # a stop string known to occur mid-way
    body["stop"] = [stop]
    whole = client.post("/v1/completions", json=body).json()
    events = stream(client, "/v1/completions", body)
    text = "".join(e["choices"][0]["text"] for e in events[:-1])
    assert text == whole["choices"][0]["text"] == full[:full.index(stop)]
    assert whole["choices"][0]["finish_reason"] == "stop"


def test_chat_stream(client):
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 32, "seed": 4, "ignore_eos": True}
    whole = client.post("/v1/chat/completions", json=body).json()
    events = stream(client, "/v1/chat/completions", body)
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert events[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    assert all(e["object"] == "chat.completion.chunk" for e in events[:-1])
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1])
    assert text == whole["choices"][0]["message"]["content"]


def test_disconnect_mid_stream_aborts_and_frees_pages_and_slots(server, client):
    aborted = metrics(client).get("photon_requests_finished_total{reason=abort}", 0.0)
    body = {"prompt": "walk away", "max_tokens": lasting_tokens(client), "ignore_eos": True, "stream": True}
    with httpx.Client(base_url=server.url, timeout=60) as own:   # its own connection, closed mid-stream
        with own.stream("POST", "/v1/completions", json=body) as r:
            seen = 0
            for line in r.iter_lines():
                seen += line.startswith("data: ")
                if seen == 3:
                    break
    wait_idle(client)
    assert metrics(client)["photon_requests_finished_total{reason=abort}"] == aborted + 1
    engine = engine_of(server)
    assert engine.idle
    engine.check_invariants()        # every KV page, row id and slot is free
    assert engine.scheduler.allocator.num_used == 0


def test_disconnect_of_a_non_streamed_request_aborts_it(server, client):
    aborted = metrics(client).get("photon_requests_finished_total{reason=abort}", 0.0)
    body = json.dumps({"prompt": "x", "max_tokens": lasting_tokens(client), "ignore_eos": True}).encode()
    with socket.create_connection((server.host, server.port), timeout=30) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        # the client leaves once the engine is generating its request, seconds before it could finish
        wait_until(lambda: client.get("/health").json()["running"] == 1, 60, "the request running")
    wait_idle(client)
    assert metrics(client)["photon_requests_finished_total{reason=abort}"] == aborted + 1
    engine_of(server).check_invariants()


def test_many_streams_some_abandoned(server, client):
    """Streams that finish and streams dropped after a few chunks, at once: all pages come back."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    async def one(c: httpx.AsyncClient, i: int) -> str | None:
        body = {"prompt": f"req {i} " * (1 + i % 5), "max_tokens": 16 + 8 * (i % 6), "seed": i,
                "temperature": 1.0, "ignore_eos": True, "stream": True}
        async with c.stream("POST", "/v1/completions", json=body) as r:
            data = []
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    data.append(line[6:])
                    if i % 4 == 0 and len(data) == 2:
                        return None          # abandoned
        return data[-1]

    async def main():
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
            return await asyncio.gather(*(one(c, i) for i in range(24)))

    # its own thread: the session's browser (conftest) may hold this one's loop as running
    with ThreadPoolExecutor(1) as pool:
        results = pool.submit(asyncio.run, main()).result()
    assert all(r == "[DONE]" for i, r in enumerate(results) if i % 4), results
    wait_idle(client)
    engine_of(server).check_invariants()


def test_metrics_parse_and_agree_with_the_engine(server, client):
    client.post("/v1/completions", json={"prompt": "count me", "max_tokens": 30, "ignore_eos": True})
    wait_idle(client)
    steps = engine_of(server).stats().steps
    # the device figures arrive with the recorder's flushes: wait until they cover every step
    m = wait_until(lambda: (m := metrics(client))["photon_step_period_seconds_count"] > 0
                   and m["photon_engine_steps_total"] == steps and m, 60, "the device figures")
    engine = engine_of(server)
    assert m["photon_engine_steps_total"] == engine.steps > 0
    assert m["photon_engine_generated_tokens_total"] == engine.tokens > 0
    assert m["photon_engine_zombie_rows_total"] == engine.zombie_rows
    assert m["photon_requests_running"] == len(engine.scheduler.running) == 0
    assert m["photon_requests_waiting"] == len(engine.scheduler.waiting) == 0
    assert m["photon_kv_pages_used"] == engine.scheduler.allocator.num_used == 0
    assert m["photon_kv_pages_capacity"] == engine.scheduler.allocator.capacity
    assert m["photon_engine_up"] == 1 and m["photon_engine_invariant_ok"] == 1
    finished = sum(v for k, v in m.items() if k.startswith("photon_requests_finished_total{"))
    completed = finished - m.get("photon_requests_finished_total{reason=abort}", 0)
    assert m["photon_time_to_first_token_seconds_count"] == completed
    assert 0 < m["photon_time_per_output_token_seconds_count"] <= completed
    assert m["photon_device_busy_seconds_total"] > 0
    assert 0 <= m["photon_device_idle_ratio"] <= 1
    assert 0 < m["photon_step_period_seconds_count"] <= engine.steps
    assert m["photon_bubbles_total{cause=accidental_sync}"] == 0   # the async mask upload: no syncs
    for cause in ("host_bound", "commit_wait", "accidental_sync", "copy_wait"):
        assert f"photon_bubble_seconds_total{{cause={cause}}}" in m


def test_trace_recent_pages_through_records_with_a_cursor(client):
    client.post("/v1/completions", json={"prompt": "record me", "max_tokens": 5, "ignore_eos": True})
    # whatever ran before: this request's records are in once a flush has carried its freeing
    first = wait_until(lambda: (b := client.get("/v1/trace/recent", params={"cursor": 0}).json())["steps"]
                       and "freed" in {r[1] for r in b["requests"]} and b, 60, "the first records")
    assert first["cursor"] > 0 and first["header"]["model"] == "tiny"
    assert first["steps"] and first["device_spans"] and first["host_spans"]
    from photon_trace.telemetry.trace.records import DeviceSpan, RequestRecord, StepRecord
    StepRecord._make(first["steps"][0])
    DeviceSpan._make(first["device_spans"][0])
    events = {RequestRecord._make(r).event for r in first["requests"]}
    assert {"arrival", "first_token", "finalized", "freed"} <= events
    client.post("/v1/completions", json={"prompt": "one more", "max_tokens": 5, "ignore_eos": True})
    later = wait_until(lambda: (b := client.get("/v1/trace/recent", params={"cursor": first["cursor"]}).json())
                       ["steps"] and b, 60, "the next flush's records")
    assert later["cursor"] > first["cursor"]
    assert later["steps"] and min(r[0] for r in later["steps"]) > max(r[0] for r in first["steps"])  # only newer
    assert client.get("/v1/trace/recent", params={"cursor": "soon"}).status_code == 400


def test_every_request_gets_an_otel_span(client, exported):
    ids = [client.post("/v1/completions", json={"prompt": f"span {i}", "max_tokens": 4, "ignore_eos": True}).json()
           ["id"] for i in range(3)]

    def spans_of_ours():      # request spans are built on the recorder's next flushes
        got = [s.attributes.get("gen_ai.response.id") for s in exported.get_finished_spans()]
        return [got.count(i) for i in ids] if all(i in got for i in ids) else None
    assert wait_until(spans_of_ours, 60, "the three request spans") == [1, 1, 1]
