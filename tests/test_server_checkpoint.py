"""The server over a real checkpoint folder (Mistral-style: its own chat template, byte-fallback
tokenizer, sliding window): chat prompts through the model's template, logprobs in OpenAI's
shapes (streamed and not), generation_config.json defaults for unset fields."""
from __future__ import annotations

import json

import httpx
import pytest

transformers = pytest.importorskip("transformers")

from photon_trace.engine.engine import Engine  # noqa: E402
from helpers.hf_folders import model_folder  # noqa: E402
from helpers.serving import serving, sse_data  # noqa: E402

SMALL = dict(backend="cpu", max_rows=8, max_step_tokens=64, max_seqs=16, kv_tokens=4096, page_size=16)
CHAT = [{"role": "user", "content": "Hello there, Émile!"}]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = model_folder("mistral", tmp_path_factory.mktemp("mistral"))
    gen = json.loads((folder / "generation_config.json").read_text())
    # greedy unless a request says otherwise: OpenAI's default would be temperature 1
    (folder / "generation_config.json").write_text(json.dumps({**gen, "temperature": 0.0}))
    return folder


@pytest.fixture(scope="module")
def client(folder):
    with serving(lambda tracer: Engine(model=str(folder), tracer=tracer, **SMALL), model_name="m") as srv:
        with httpx.Client(base_url=srv.url, timeout=120) as c:
            yield c


def test_chat_prompts_use_the_models_template(client, folder):
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    expect = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=True, return_dict=False)
    r = client.post("/v1/chat/completions", json={"messages": CHAT, "max_tokens": 4})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == len(expect)
    refused = client.post("/v1/chat/completions", json={"messages": [{"role": "system", "content": "x"}, *CHAT]})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "messages"
    assert "Conversation roles must alternate" in refused.json()["error"]["message"]


def test_generation_config_defaults_apply_to_unset_fields(client):
    """temperature 0 from generation_config.json: unset, any seed gives the greedy text."""
    texts = {client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 12, "seed": s,
                                                 "ignore_eos": True}).json()["choices"][0]["text"]
             for s in (1, 2, 3)}
    assert len(texts) == 1
    hot = {client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 12, "seed": s, "temperature": 1.5,
                                               "ignore_eos": True}).json()["choices"][0]["text"] for s in (1, 2, 3)}
    assert len(hot) > 1


def test_chat_logprobs_streamed_and_not(client):
    body = {"messages": CHAT, "max_tokens": 10, "logprobs": True, "top_logprobs": 3, "ignore_eos": True}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == r.json()["usage"]["completion_tokens"] == 10
    for entry in content:   # greedy: the sampled token is the likeliest
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"} and len(entry["top_logprobs"]) == 3
        assert entry["top_logprobs"][0]["logprob"] == entry["logprob"] <= 0
        assert entry["top_logprobs"][0]["bytes"] == entry["bytes"]
        if "\ufffd" not in entry["token"]:   # a piece of a character shows as U+FFFD; its bytes are exact
            assert bytes(entry["bytes"]) == entry["token"].encode("utf-8")
    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as s:
        chunks = [json.loads(d) for d in sse_data(s.iter_lines()) if d != "[DONE]"]
    streamed = [e for c in chunks if c["choices"] and c["choices"][0]["logprobs"]
                for e in c["choices"][0]["logprobs"]["content"]]
    assert streamed == content


def test_completion_logprobs_legacy_shape(client):
    r = client.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 8, "logprobs": 2, "ignore_eos": True})
    assert r.status_code == 200, r.text
    lp = r.json()["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 8
    assert all(len(t) == 2 for t in lp["top_logprobs"])
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])
    with client.stream("POST", "/v1/completions", json={"prompt": "Hello", "max_tokens": 8, "logprobs": 2,
                                                         "ignore_eos": True, "stream": True}) as s:
        chunks = [json.loads(d) for d in sse_data(s.iter_lines()) if d != "[DONE]"]
    parts = [c["choices"][0]["logprobs"] for c in chunks if c["choices"] and c["choices"][0]["logprobs"]]
    assert [t for p in parts for t in p["tokens"]] == lp["tokens"]
    assert [o for p in parts for o in p["text_offset"]] == lp["text_offset"]


def test_top_k_past_the_vocabulary_is_served(client):
    """2**63 would overflow the device's int64 staging; the engine clips it to the vocabulary."""
    for k in (10**6, 2**63):
        r = client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 3, "top_k": k, "temperature": 1.0})
        assert r.status_code == 200, r.text
    assert client.get("/health").json()["status"] == "ok"


@pytest.mark.parametrize("path, body, param", [
    ("/v1/chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("/v1/chat/completions", {"messages": CHAT, "top_logprobs": 2}, "top_logprobs"),
    ("/v1/chat/completions", {"messages": CHAT, "logprobs": 3}, "logprobs"),
    ("/v1/completions", {"prompt": "hi", "logprobs": 25}, "logprobs"),
    ("/v1/completions", {"prompt": "hi", "logprobs": True}, "logprobs"),
    ("/v1/completions", {"prompt": "hi", "n": 2}, "n"),
])
def test_bad_logprob_requests_name_their_param(client, path, body, param):
    r = client.post(path, json=body)
    assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
