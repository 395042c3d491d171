"""vLLM's request fields through the official ``openai`` client (``extra_body``): ``min_p``, and
``guided_json`` / ``guided_regex`` / ``guided_choice`` / ``guided_grammar`` as aliases of our
response formats (the same request either way draws the same tokens); each documented in
/openapi.json, where schemathesis generates bodies from (``test_server_schemathesis.py``)."""
from __future__ import annotations

import json
import re

import httpx
import pytest

openai = pytest.importorskip("openai")

from helpers.serving import SHARED_KEY, left_clean  # noqa: E402

KEY = SHARED_KEY
CHAT = dict(model="tiny", messages=[{"role": "user", "content": "Answer"}], temperature=1.0)
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
          "additionalProperties": False}
GRAMMAR = 'root ::= "id-" [0-9] [0-9] [0-9]'


@pytest.fixture(scope="module")
def server(keyed_tiny_server):
    """The session's tiny server behind KEY (conftest), left idle and healthy for the next module."""
    yield keyed_tiny_server
    left_clean(keyed_tiny_server, KEY)


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60) as c:
        yield c


def _chat(client, seed: int, max_tokens: int = 40, **extra):
    response_format = extra.pop("response_format", None)
    kw = {"response_format": response_format} if response_format else {}
    return client.chat.completions.create(**CHAT, seed=seed, max_tokens=max_tokens, extra_body=extra, **kw)


@pytest.mark.parametrize("guided, response_format", [
    ({"guided_json": SCHEMA}, {"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA}}),
    ({"guided_json": json.dumps(SCHEMA)}, {"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA}}),
    ({"guided_regex": "[a-c]{2}x[0-9]"}, {"type": "regex", "regex": "[a-c]{2}x[0-9]"}),
    ({"guided_grammar": GRAMMAR}, {"type": "grammar", "grammar": GRAMMAR}),
], ids=["json", "json-text", "regex", "grammar"])
def test_a_guided_field_is_its_response_format(client, guided, response_format):
    for seed in (1, 2, 3):
        alias = _chat(client, seed, **guided)
        plain = _chat(client, seed, response_format=response_format)
        assert alias.choices[0].message.content == plain.choices[0].message.content
        assert alias.choices[0].finish_reason == plain.choices[0].finish_reason
    text = alias.choices[0].message.content
    if "guided_regex" in guided:
        assert re.fullmatch(guided["guided_regex"], text) and alias.choices[0].finish_reason == "stop"
    if "guided_grammar" in guided:
        assert re.fullmatch(r"id-[0-9]{3}", text) and alias.choices[0].finish_reason == "stop"


def test_guided_choice_answers_one_of_the_choices(client):
    choices = ['yes', 'no', 'say "maybe"', 'back\\slash', 'ünï 😀']
    seen = set()
    for seed in range(12):
        r = _chat(client, seed, max_tokens=30, guided_choice=choices)
        assert r.choices[0].message.content in choices and r.choices[0].finish_reason == "stop"
        seen.add(r.choices[0].message.content)
    assert len(seen) > 1, "every seed gave the same choice: the choice is not sampled"
    c = client.completions.create(model="tiny", prompt="Pick", max_tokens=30, seed=5,
                                  extra_body={"guided_choice": ["left", "right"]})
    assert c.choices[0].text in ("left", "right")


@pytest.mark.parametrize("extra, param", [
    ({"guided_regex": "a+", "guided_choice": ["a"]}, "guided_choice"),
    ({"guided_json": SCHEMA, "response_format": {"type": "json_object"}}, "guided_json"),
    ({"guided_choice": []}, "guided_choice"),
    ({"guided_choice": ["a", ""]}, "guided_choice"),
    ({"guided_json": "{not json"}, "guided_json"),
    ({"guided_json": "NaN"}, "guided_json"),
    ({"guided_json": "[" * 100 + "]" * 100}, "guided_json"),
    ({"guided_json": "5"}, "guided_json"),
    ({"guided_regex": "(unclosed"}, "guided_regex"),
    ({"guided_grammar": "root ::= missing_rule"}, "guided_grammar"),
    ({"guided_choice": "yes"}, "guided_choice"),
    ({"min_p": 1.5}, "min_p"),
    ({"min_p": -0.1}, "min_p"),
])
def test_bad_vllm_fields_are_400s_naming_the_field(client, extra, param):
    response_format = extra.pop("response_format", None)
    kw = {"response_format": response_format} if response_format else {}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**CHAT, max_tokens=5, extra_body=extra, **kw)
    assert e.value.body["param"] == param, e.value.body


def test_min_p_filters_what_is_sampled(client):
    """min_p 1 keeps only the likeliest token: greedy at any temperature; a small min_p at a high
    temperature still samples (the text differs from greedy), and a request stays reproducible."""
    base = dict(model="tiny", prompt="aaaa", max_tokens=24, extra_body={"ignore_eos": True})
    greedy = client.completions.create(**base, temperature=0).choices[0].text
    one = client.completions.create(**{**base, "extra_body": {"ignore_eos": True, "min_p": 1.0}},
                                    temperature=2.0, seed=9).choices[0].text
    assert one == greedy
    low = [client.completions.create(**{**base, "extra_body": {"ignore_eos": True, "min_p": 0.05}},
                                     temperature=2.0, seed=9).choices[0].text for _ in range(2)]
    assert low[0] == low[1] != greedy


def test_the_vllm_fields_are_in_the_openapi_schema(server):
    doc = httpx.get(server.url + "/openapi.json", timeout=30).json()
    for body in ("CompletionRequest", "ChatCompletionRequest"):
        props = doc["components"]["schemas"][body]["properties"]
        for name in ("min_p", "guided_json", "guided_regex", "guided_choice", "guided_grammar"):
            assert name in props, f"{body}.{name}"
