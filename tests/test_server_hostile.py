"""Requests written to hurt the server, against a real uvicorn server without an API key (the
default): each one gets a clear 4xx naming what is wrong, the engine keeps serving, and no
web page the user visits can drive the server."""
from __future__ import annotations

import json
import socket

import httpx
import pytest

from photon_trace.engine.engine import Engine
from helpers.serving import metric_samples, serving

TINY = dict(model="tiny", backend="cpu", max_rows=16, max_step_tokens=64, max_seqs=32,
            kv_tokens=2048, page_size=8, max_context=256)
BODY_LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def server():
    with serving(lambda tracer: Engine(tracer=tracer, **TINY), model_name="tiny", max_body_bytes=BODY_LIMIT) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def error(r: httpx.Response, status: int, param: str | None = None) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if param is not None:
        assert err["param"] == param, err
    assert r.headers["x-request-id"]
    return err


def still_serving(client) -> None:
    r = client.post("/v1/completions", json={"prompt": "still here", "max_tokens": 4, "ignore_eos": True})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["restarts"] == 0


@pytest.mark.parametrize("top_k", [2**63, 2**70, 2561, 10**6])
def test_top_k_past_the_vocabulary_means_the_whole_vocabulary(client, top_k):
    r = client.post("/v1/completions", json={"prompt": "k", "max_tokens": 6, "top_k": top_k, "seed": 1,
                                             "temperature": 1.0, "ignore_eos": True})
    assert r.status_code == 200, r.text
    off = client.post("/v1/completions", json={"prompt": "k", "max_tokens": 6, "top_k": 0, "seed": 1,
                                               "temperature": 1.0, "ignore_eos": True})
    assert r.json()["choices"][0]["text"] == off.json()["choices"][0]["text"]
    still_serving(client)


def test_a_text_plain_post_from_a_web_page_is_refused(client):
    """A CORS "simple" request: a page may send it anywhere without asking. 415, never run."""
    before = metric_samples(client.base_url.__str__().rstrip("/"))["photon_engine_steps_total"]
    body = json.dumps({"prompt": "csrf", "max_tokens": 200, "top_k": 2**63})
    r = client.post("/v1/completions", content=body, headers={"Content-Type": "text/plain"})
    error(r, 415)
    r = client.post("/v1/completions", content=body,
                    headers={"Content-Type": "application/json", "Origin": "http://evil.example"})
    assert error(r, 403)["code"] == "cross_origin"
    assert metric_samples(str(client.base_url).rstrip("/"))["photon_engine_steps_total"] == before
    same = client.post("/v1/completions", json={"prompt": "ok", "max_tokens": 2},
                       headers={"Origin": str(client.base_url).rstrip("/")})
    assert same.status_code == 200


def test_dns_rebinding_is_refused_by_the_host_allowlist(server, client):
    r = client.get("/v1/models", headers={"Host": f"evil.example:{server.port}"})
    assert error(r, 403)["code"] == "host_not_allowed"
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}"):
        assert client.get("/v1/models", headers={"Host": host}).status_code == 200


def test_an_oversized_body_is_413_before_it_is_read(server, client):
    big = b'{"prompt": "' + b"x" * (BODY_LIMIT + 10) + b'"}'
    error(client.post("/v1/completions", content=big, headers={"Content-Type": "application/json"}), 413)

    def chunks():          # no Content-Length: counted as it streams in
        for _ in range(BODY_LIMIT // 4096 + 2):
            yield b" " * 4096
    r = client.post("/v1/completions", content=chunks(), headers={"Content-Type": "application/json"})
    error(r, 413)
    still_serving(client)


def test_a_64_mb_body_costs_no_memory(server, client):
    """Refused on its declared length: the server reads none of it."""
    with socket.create_connection((server.host, server.port), timeout=30) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 67108864\r\n\r\n" + b"[" * 65536)
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413")
    still_serving(client)


@pytest.mark.parametrize("path, body, param", [
    ("/v1/completions", "[" * 3000 + "]" * 3000, None),
    ("/v1/completions", '{"prompt": "x", "response_format": ' + '{"a":' * 3000 + "1" + "}" * 3001, "response_format"),
    ("/v1/completions", '{"\\ud800": ' + "[" * 3000 + "]" * 3000 + "}", None),
    ("/v1/completions", '{"prompt": "x", "temperature": 1e400}', "temperature"),
    ("/v1/completions", '{"prompt": "x", "temperature": NaN}', None),
    ("/v1/completions", '{"prompt": "a\\ud800b"}', "prompt"),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "a\\udfffb"}]}', "messages[0].content"),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud800"}]}]}',
     "messages[0].content[0].text"),
    ("/v1/point", '{"object": "a\\ud800b"}', "object"),
])
def test_bodies_that_broke_parsers_are_400s_naming_the_field(client, path, body, param):
    r = client.post(path, content=body, headers={"Content-Type": "application/json"})
    error(r, 400, param)


def test_a_deeply_nested_json_schema_is_a_400(client):
    schema: dict = {"type": "integer"}
    for _ in range(98):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "deep", "schema": schema}}
    error(client.post("/v1/completions", json={"prompt": "x", "response_format": fmt}), 400, "response_format")
    still_serving(client)


def test_bad_input_leaves_the_engine_unhurt(client):
    still_serving(client)
