"""The HTTP API against a real uvicorn server (tiny preset, CPU backend): bad input gets an
OpenAI-style 4xx while the engine keeps serving, and structured outputs come back structured."""
from __future__ import annotations

import json
import re
import threading

import httpx
import jsonschema
import pytest

from helpers.serving import SHARED_KEY, TINY_SERVER, left_clean

KEY = SHARED_KEY


@pytest.fixture(scope="module")
def server(keyed_tiny_server):
    """The session's tiny server behind KEY (conftest), left idle and healthy for the next module."""
    yield keyed_tiny_server
    left_clean(keyed_tiny_server, KEY)


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
        yield c


def assert_error(r: httpx.Response, status: int, param: str | None = None, code: str | None = None) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["message"]
    if param is not None:
        assert body["error"]["param"] == param, body
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


LONG_PROMPT = "x" * 300      # past the 256-token context
SCHEMA_BAD = {"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "nonsense"}}}

BAD_COMPLETIONS = [
    ("missing prompt", {"max_tokens": 4}, 400, "prompt", None),
    ("empty prompt", {"prompt": ""}, 400, "prompt", None),
    ("empty token list", {"prompt": []}, 400, "prompt", None),
    ("token id out of vocab", {"prompt": [1, 10**6]}, 400, "prompt", None),
    ("prompt over the context", {"prompt": LONG_PROMPT}, 400, "prompt", "context_length_exceeded"),
    ("max_tokens zero", {"prompt": "hi", "max_tokens": 0}, 400, "max_tokens", None),
    ("max_tokens negative", {"prompt": "hi", "max_tokens": -5}, 400, "max_tokens", None),
    ("max_tokens over the limit", {"prompt": "hi", "max_tokens": 10_000}, 400, "max_tokens",
     "context_length_exceeded"),
    ("max_tokens not an int", {"prompt": "hi", "max_tokens": "many"}, 400, "max_tokens", None),
    ("temperature negative", {"prompt": "hi", "temperature": -1}, 400, "temperature", None),
    ("temperature too high", {"prompt": "hi", "temperature": 3.0}, 400, "temperature", None),
    ("top_p zero", {"prompt": "hi", "top_p": 0}, 400, "top_p", None),
    ("top_p over one", {"prompt": "hi", "top_p": 1.5}, 400, "top_p", None),
    ("invalid schema", {"prompt": "hi", "response_format": SCHEMA_BAD}, 400, "response_format", None),
    ("invalid regex", {"prompt": "hi", "response_format": {"type": "regex", "regex": "(["}}, 400,
     "response_format", None),
    ("unknown format", {"prompt": "hi", "response_format": {"type": "yaml"}}, 400, "response_format", None),
    ("unknown model", {"prompt": "hi", "model": "gpt-9"}, 404, "model", "model_not_found"),
    ("n > 1", {"prompt": "hi", "n": 3}, 400, "n", None),
]


@pytest.mark.parametrize("case", BAD_COMPLETIONS, ids=[c[0] for c in BAD_COMPLETIONS])
def test_bad_completion_requests_get_openai_errors(client, case):
    _, body, status, param, code = case
    assert_error(client.post("/v1/completions", json=body), status, param, code)


@pytest.mark.parametrize("content", [b"{not json", b"", b"[1, 2]", b"\xff\xfe"])
def test_malformed_bodies_are_400(client, content):
    r = client.post("/v1/completions", content=content, headers={"Content-Type": "application/json"})
    assert_error(r, 400)


BAD_CHATS = [
    ("missing messages", {"max_tokens": 4}, 400, "messages"),
    ("empty messages", {"messages": []}, 400, "messages"),
    ("no user message", {"messages": [{"role": "system", "content": "x"}]}, 400, "messages"),
    ("unknown role", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role"),
    ("chat over the context", {"messages": [{"role": "user", "content": LONG_PROMPT}]}, 400, "messages"),
    ("max_completion_tokens zero", {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0},
     400, "max_tokens"),
]


@pytest.mark.parametrize("case", BAD_CHATS, ids=[c[0] for c in BAD_CHATS])
def test_bad_chat_requests_get_openai_errors(client, case):
    _, body, status, param = case
    assert_error(client.post("/v1/chat/completions", json=body), status, param)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}],
                         ids=["missing", "wrong", "not bearer"])
def test_wrong_api_key_is_401_before_anything_else(server, headers):
    for path, body in (("/v1/completions", b"{not json"), ("/v1/chat/completions", b"{}")):
        r = httpx.post(server.url + path, content=body, headers=headers, timeout=30)
        assert_error(r, 401, code="invalid_api_key")
    assert_error(httpx.get(server.url + "/v1/models", headers=headers, timeout=30), 401)


def test_with_a_key_metrics_need_it_and_health_without_it_is_only_the_status(server, client):
    """A probe without the key learns whether the server is up, nothing more: no model, counts
    or failures; ``/metrics`` (call sites, request counts) is behind the key like ``/v1/*``."""
    r = httpx.get(server.url + "/health", timeout=30)
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    full = client.get("/health").json()
    assert full["status"] == "ok" and full["model"] == "tiny" and "kv_pages_used" in full
    assert_error(httpx.get(server.url + "/metrics", timeout=30), 401, code="invalid_api_key")
    assert_error(httpx.get(server.url + "/metrics", headers={"Authorization": "Bearer wrong"}, timeout=30), 401)
    m = client.get("/metrics")
    assert m.status_code == 200 and "photon_engine_up" in m.text


def test_unknown_route_is_an_openai_error(client):
    assert_error(client.get("/v1/nothing-here"), 404)


def test_models_lists_the_served_model(client):
    body = client.get("/v1/models").json()
    assert body["object"] == "list" and [m["id"] for m in body["data"]] == ["tiny"]
    assert body["data"][0]["max_model_len"] == TINY_SERVER["max_context"]


def test_bad_requests_leave_a_running_request_untouched(server, client):
    """A long request keeps going (and finishes whole) while every bad request is refused."""
    result: dict = {}

    def long_request():
        result["r"] = client.post("/v1/completions", json={"prompt": "steady", "max_tokens": 120,
                                                           "ignore_eos": True, "seed": 1})

    t = threading.Thread(target=long_request)
    t.start()
    for _, body, status, _, _ in BAD_COMPLETIONS:
        assert client.post("/v1/completions", json=body).status_code == status
    t.join(120)
    r = result["r"]
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] == 120
    assert r.json()["choices"][0]["finish_reason"] == "length"
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["invariants"] == "ok"


def test_completion_and_chat_shapes(client):
    r = client.post("/v1/completions", json={"model": "tiny", "prompt": "Hello", "max_tokens": 8,
                                             "ignore_eos": True, "seed": 3})
    body = r.json()
    assert r.status_code == 200 and body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert body["usage"] == {"prompt_tokens": 6, "completion_tokens": 8, "total_tokens": 14}
    assert body["choices"][0]["finish_reason"] == "length"
    r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}],
                                                  "max_tokens": 8, "ignore_eos": True, "seed": 3})
    body = r.json()
    assert r.status_code == 200 and body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert isinstance(body["choices"][0]["message"]["content"], str)
    assert body["usage"]["completion_tokens"] == 8


def test_token_id_prompt_is_taken_as_is(client):
    r = client.post("/v1/completions", json={"prompt": [257, 72, 105], "max_tokens": 4, "ignore_eos": True})
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == 3


SCHEMA = {"type": "object", "properties": {"color": {"enum": ["red", "green"]}, "size": {"type": "integer"}},
          "required": ["color", "size"], "additionalProperties": False}


def test_json_schema_output_validates(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA}}
    r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "Give JSON"}],
                                                  "max_tokens": 200, "temperature": 1.0, "seed": 2,
                                                  "response_format": fmt})
    body = r.json()
    assert r.status_code == 200 and body["choices"][0]["finish_reason"] == "stop", body
    value = json.loads(body["choices"][0]["message"]["content"])
    jsonschema.validate(value, SCHEMA)
    assert body["photon_trace"]["result"]["json"] == value


def test_json_object_and_regex_outputs(client):
    r = client.post("/v1/completions", json={"prompt": "Give JSON", "max_tokens": 60, "temperature": 0,
                                             "response_format": {"type": "json_schema", "json_schema": {
                                                 "name": "c", "schema": {"enum": ["red", "green", "blue"]}}}})
    assert json.loads(r.json()["choices"][0]["text"]) in ("red", "green", "blue")
    r = client.post("/v1/completions", json={"prompt": "Code:", "max_tokens": 40,
                                             "response_format": {"type": "regex", "regex": "[A-F]{3}-[0-9]{2}"}})
    body = r.json()
    assert re.fullmatch("[A-F]{3}-[0-9]{2}", body["choices"][0]["text"]), body
    assert body["choices"][0]["finish_reason"] == "stop"


def test_point_returns_normalised_points(client):
    r = client.post("/v1/point", json={"object": "the red car", "max_objects": 3, "seed": 4})
    body = r.json()
    assert r.status_code == 200 and body["object"] == "point", body
    assert 1 <= len(body["points"]) <= 3
    for p in body["points"]:
        assert set(p) == {"x", "y"} and 0 < p["x"] < 1 and 0 < p["y"] < 1


def test_point_takes_max_count_as_well(client):
    r = client.post("/v1/point", json={"object": "dogs", "max_count": 2, "seed": 9})
    assert r.status_code == 200 and 1 <= len(r.json()["points"]) <= 2, r.json()


def test_detect_returns_boxes(client):
    r = client.post("/v1/detect", json={"object": "cats", "max_objects": 4, "temperature": 1.0, "seed": 5})
    body = r.json()
    assert r.status_code == 200 and body["object"] == "detect", body
    assert len(body["objects"]) <= 4 and body["finish_reason"] == "stop"
    for b in body["objects"]:
        assert 0 <= b["x_min"] <= b["x_max"] <= 1 and 0 <= b["y_min"] <= b["y_max"] <= 1


@pytest.mark.parametrize("body, param", [
    ({}, "object"), ({"object": "cat", "image": "data:image/png;base64,AAAA"}, "image"),
    ({"object": "cat", "max_objects": 0}, "max_objects"), ({"object": "cat", "max_objects": 500}, "max_objects"),
    ({"object": "cat", "model": "other"}, "model"), ({"object": "cat", "temperature": 9}, "temperature"),
])
def test_bad_skill_requests(client, body, param):
    for path in ("/v1/point", "/v1/detect"):
        err = assert_error(client.post(path, json=body), 404 if param == "model" else 400)
        assert err["param"] == param


def test_the_engine_has_every_member_the_server_relies_on(server):
    """``ServedEngine`` names what the server uses of an engine; the one it runs has all of it."""
    from photon_trace.server.served_engine import ServedEngine
    assert isinstance(server.app.state.server.loop.engine, ServedEngine)


def test_trace_recent_needs_the_key(server):
    assert_error(httpx.get(server.url + "/v1/trace/recent", timeout=30), 401)
