"""OpenAI compatibility, through the official ``openai`` client where it can say it, and raw
HTTP where the client would hide it: nulls accepted, no silent coercion, every field we do
not implement named in a 400, models by id, 405 with Allow."""
from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

openai = pytest.importorskip("openai")

from photon_trace.engine.params import SamplingParams  # noqa: E402
from helpers.serving import SHARED_KEY, left_clean  # noqa: E402

KEY = SHARED_KEY
HAS_PENALTIES = "presence_penalty" in {f.name for f in dataclasses.fields(SamplingParams)}


@pytest.fixture(scope="module")
def server(keyed_tiny_server):
    """The session's tiny server behind KEY (conftest), left idle and healthy for the next module."""
    yield keyed_tiny_server
    left_clean(keyed_tiny_server, KEY)


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
        yield c


def test_models_list_and_retrieve(client):
    assert [m.id for m in client.models.list()] == ["tiny"]
    assert client.models.retrieve("tiny").id == "tiny"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-9")


def test_completion_and_chat_through_the_client(client):
    c = client.completions.create(model="tiny", prompt="Hello", max_tokens=8, seed=3,
                                  extra_body={"ignore_eos": True})
    assert c.object == "text_completion" and c.usage.completion_tokens == 8
    assert c.choices[0].finish_reason == "length"
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}],
                                          max_tokens=10, seed=4, temperature=0.8, top_p=0.9,
                                          extra_body={"ignore_eos": True, "top_k": 50})
    text = chat.choices[0].message.content
    stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}],
                                            max_tokens=10, seed=4, temperature=0.8, top_p=0.9, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True, "top_k": 50})
    chunks = list(stream)
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == text
    assert chunks[-1].usage.completion_tokens == 10


def test_structured_output_through_the_client(client):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "JSON"}], max_tokens=60,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "n", "schema": schema}})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content)["n"], int)


@pytest.mark.parametrize("field, value", [
    ("logit_bias", {"5": 10}), ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
    ("tool_choice", "auto"), ("top_logprobs", 2), ("n", 2),   # top_logprobs without logprobs: true
])
def test_chat_fields_we_do_not_implement_are_named_400s(client, field, value):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], max_tokens=2,
                                       **{field: value})
    assert info.value.body["param"] == field


@pytest.mark.parametrize("field, value", [("suffix", "end"), ("best_of", 2), ("echo", True), ("logprobs", 21)])
def test_completion_fields_we_do_not_implement_are_named_400s(client, field, value):
    """(logprobs past OpenAI's 20 alternatives is out of range, not unimplemented: also a 400 naming it.)"""
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="tiny", prompt="x", max_tokens=2, **{field: value})
    assert info.value.body["param"] == field


@pytest.mark.parametrize("body, param", [
    ({"max_tokens": "12"}, "max_tokens"), ({"stream": "yes"}, "stream"), ({"n": 1.0}, "n"),
    ({"temperature": "0.5"}, "temperature"), ({"ignore_eos": 1}, "ignore_eos"), ({"seed": True}, "seed"),
    ({"stop": 5}, "stop"), ({"frobnicate": 1}, "frobnicate"), ({"stream_options": {"x": 1}}, "stream_options.x"),
    ({"presence_penalty": 2.5}, "presence_penalty"), ({"frequency_penalty": -3}, "frequency_penalty"),
])
def test_no_silent_coercion_and_no_unknown_field(http, body, param):
    r = http.post("/v1/completions", json={"prompt": "x", **body})
    assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text


def test_nulls_mean_the_default(http):
    nulls = {k: None for k in ("n", "stream", "stream_options", "temperature", "top_p", "top_k", "seed", "stop",
                               "presence_penalty", "frequency_penalty", "logprobs", "echo", "user", "logit_bias",
                               "suffix", "response_format", "ignore_eos", "model")}
    r = http.post("/v1/completions", json={"prompt": "x", "max_tokens": 3, **nulls})
    assert r.status_code == 200, r.text
    del nulls["echo"], nulls["suffix"]          # completions' fields: unknown to chat, as at OpenAI
    r = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
                                                "max_completion_tokens": None, "tools": None, **nulls})
    assert r.status_code == 200, r.text


def test_405_carries_allow(http):
    r = http.get("/v1/completions")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json()["error"]["message"]


@pytest.mark.skipif(not HAS_PENALTIES, reason="the engine's SamplingParams has no penalties yet (issue 14)")
def test_presence_and_frequency_penalties_change_what_is_sampled(client):
    base = dict(model="tiny", prompt="aaaa", max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    plain = client.completions.create(**base).choices[0].text
    for kw in ({"frequency_penalty": 2.0}, {"presence_penalty": 2.0}):
        penalised = client.completions.create(**base, **kw).choices[0].text
        assert penalised != plain
        assert len(set(penalised)) >= len(set(plain))      # penalised repeats: more distinct characters


def test_logprobs_come_back_in_openais_shapes_through_the_client(client):
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for item in content:
        assert item.logprob <= 0 and len(item.top_logprobs) == 3
        assert item.top_logprobs[0].logprob >= item.top_logprobs[-1].logprob
        assert item.logprob == pytest.approx(item.top_logprobs[0].logprob, abs=1e-5)   # greedy: the best one
    c = client.completions.create(model="tiny", prompt="hello", max_tokens=4, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == c.usage.completion_tokens
    # the legacy shape is {text: logprob}: two byte tokens that both decode to U+FFFD share a key
    assert all(1 <= len(alts) <= 2 for alts in lp.top_logprobs)
