"""Server rules that need no engine: value validation, the chat template, stream text assembly."""
from __future__ import annotations

import math

import pytest

from photon_trace.engine.model.tokenizer import ByteTokenizer
from photon_trace.server.device_stats import subtract
from photon_trace.server.errors import APIError
from photon_trace.server.protocol import ChatMessage
from photon_trace.server.streaming import TextStream
from photon_trace.server import validate

LIMITS = validate.Limits(model="tiny", max_context=64, vocab_size=2560)


def _params(**kw):
    base = dict(temperature=None, top_p=None, seed=None, max_tokens=8)
    return validate.sampling_params(**{**base, **kw})


def _err(fn, *args, **kw) -> APIError:
    with pytest.raises(APIError) as info:
        fn(*args, **kw)
    return info.value


@pytest.mark.parametrize("kw, param", [
    (dict(temperature=-0.1), "temperature"), (dict(temperature=2.5), "temperature"),
    (dict(temperature=math.nan), "temperature"), (dict(top_p=0.0), "top_p"), (dict(top_p=1.01), "top_p"),
    (dict(top_k=-2), "top_k"), (dict(seed=-1), "seed"), (dict(seed=2**63), "seed"),
    (dict(stop=["a", "b", "c", "d", "e"]), "stop"), (dict(stop=[""]), "stop"),
])
def test_bad_sampling_values_name_their_param(kw, param):
    e = _err(_params, **kw)
    assert (e.status, e.param) == (400, param)


def test_defaults_follow_openai():
    p = _params(stop="END")
    assert (p.temperature, p.top_p, p.top_k, p.stop) == (1.0, 1.0, 0, ("END",))
    assert _params(top_k=-1).top_k == 0


def test_max_tokens_bounds_and_default_clipping():
    assert validate.max_tokens(None, 10, LIMITS, default=256) == 54   # clipped to the room left
    assert validate.max_tokens(54, 10, LIMITS, default=16) == 54
    for bad in (0, -3):
        assert _err(validate.max_tokens, bad, 10, LIMITS, 16).param == "max_tokens"
    e = _err(validate.max_tokens, 55, 10, LIMITS, 16)
    assert (e.param, e.code) == ("max_tokens", validate.CONTEXT_EXCEEDED)
    e = _err(validate.check_context, 64, LIMITS, "prompt")
    assert (e.param, e.code) == ("prompt", validate.CONTEXT_EXCEEDED)


def test_prompt_forms():
    assert validate.prompt_text("hi") == validate.prompt_text(["hi"]) == "hi"
    assert validate.prompt_text([5, 6]) is None
    assert validate.prompt_ids([5, 6], 2560) == [5, 6]
    assert _err(validate.prompt_text, "").param == "prompt"
    for bad in ([], None, 3, ["a", "b"], [1, 9999], [True, 2]):
        assert _err(validate.prompt_ids, bad, 2560).param == "prompt"


def test_top_k_past_the_vocabulary_is_the_whole_vocabulary():
    assert _params(top_k=2**63, vocab_size=2560).top_k == 0
    assert _params(top_k=2559, vocab_size=2560).top_k == 2559


@pytest.mark.parametrize("name", ["presence_penalty", "frequency_penalty"])
def test_penalties_are_in_openais_range(name):
    for bad in (2.01, -2.5, math.nan, math.inf):
        assert _err(_params, **{name: bad}).param == name


def test_fallback_chat_template_and_bad_messages():
    tok = ByteTokenizer()   # no template of its own: the documented one, after the presets' BOS
    ids = validate.chat_prompt([ChatMessage(role="system", content="Be brief."),
                                ChatMessage(role="user", content=[{"type": "text", "text": "Hi"}])], tok)
    assert ids == [tok.BOS_ID, *b"<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n"]
    assert _err(validate.chat_prompt, [], tok).param == "messages"
    assert _err(validate.chat_prompt, [ChatMessage(role="wizard", content="x")], tok).param == "messages[0].role"
    assert _err(validate.chat_prompt, [ChatMessage(role="system", content="x")], tok).param == "messages"
    image = ChatMessage(role="user", content=[{"type": "image_url", "image_url": {"url": "x"}}])
    assert _err(validate.chat_prompt, [image], tok).code == "unsupported_value"


def test_response_formats():
    assert validate.response_format(None) is None and validate.response_format({"type": "text"}) is None
    assert validate.response_format({"type": "json_object"}).kind == "json_object"
    fmt = validate.response_format({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer"}}})
    assert (fmt.kind, fmt.schema_value) == ("json_schema", {"type": "integer"})
    assert validate.response_format({"type": "regex", "regex": "[ab]+"}).regex == "[ab]+"
    for bad in ({"type": "yaml"}, {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"schema": 5}},
                {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}, {"type": "regex"}):
        assert _err(validate.response_format, bad).param == "response_format"


def test_model_name_and_unsupported_options():
    validate.check_model(None, LIMITS)
    validate.check_model("tiny", LIMITS)
    e = _err(validate.check_model, "gpt-4", LIMITS)
    assert (e.status, e.code, e.param) == (404, "model_not_found", "model")
    assert _err(validate.check_n, 2).param == "n"


def test_error_body_shape():
    body = APIError(400, "nope", param="x", code="c").body()
    assert body == {"error": {"message": "nope", "type": "invalid_request_error", "param": "x", "code": "c"}}


def test_text_stream_holds_back_a_stop_string_until_the_engine_cuts_it():
    tok = ByteTokenizer()
    ts = TextStream(tok, stop=("STOP",))
    sent = ts.push(tok.encode("hello S"))
    sent += ts.push(tok.encode("TO"))
    assert "S" not in sent                  # "STO" might begin the stop string: held back
    sent += ts.finish("hello ")             # the last update ("P"): the engine's text, stop string cut
    assert sent == "hello "


def test_text_stream_joins_split_utf8_and_matches_the_final_text():
    tok = ByteTokenizer()
    data = "né €".encode()
    ts = TextStream(tok)
    pieces = [ts.push([b]) for b in data]
    assert pieces[1] == ""                  # first byte of "é" alone decodes to nothing yet
    assert "".join(pieces) + ts.finish(tok.decode(list(data))) == "né €"


def test_subtract_cuts_engine_sleeps_out_of_a_window():
    assert subtract((0, 100), []) == [(0, 100)]
    assert subtract((0, 100), [(10, 20), (15, 30), (90, 200)]) == [(0, 10), (30, 90)]
    assert subtract((0, 100), [(-5, 150)]) == []
