"""JSON outputs within bounds: whitespace between tokens is bounded (an unbounded grammar lets a
model spend its whole budget on spaces), a legal number no double holds leaves the result
serialisable, and a schema nested past the limit is a ConstraintError, not a RecursionError."""
from __future__ import annotations

import json
import re

import pytest

from photon_trace.engine.constraints import ConstraintCompiler, ConstraintError, ResponseFormat
from photon_trace.engine.constraints.grammar import JSON_MAX_WHITESPACE
from photon_trace.engine.params import SamplingParams
from photon_trace.engine.model.tokenizer import ByteTokenizer
from helpers.constraint_masks import allowed_ids

VOCAB = 2560


@pytest.fixture(scope="module")
def compiler() -> ConstraintCompiler:
    return ConstraintCompiler(ByteTokenizer(), VOCAB)


@pytest.mark.parametrize("fmt", [ResponseFormat("json_object"),
                                 ResponseFormat("json_schema", schema={"type": "object", "properties": {
                                     "a": {"type": "integer"}}, "required": ["a"]})], ids=["object", "schema"])
def test_whitespace_between_json_tokens_is_bounded(compiler, fmt):
    c = compiler.make(fmt)
    c.advance(ord("{"))
    for _ in range(JSON_MAX_WHITESPACE):
        assert ord(" ") in allowed_ids(c, VOCAB)
        c.advance(ord(" "))
    assert not allowed_ids(c, VOCAB) & {ord(" "), ord("\n"), ord("\t"), ord("\r")}


def whitespace_runs_outside_strings(text: str) -> list[int]:
    outside = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    return [len(m) for m in re.findall(r"[ \t\n\r]+", outside)]


def test_json_mode_outputs_are_not_mostly_whitespace(tiny_engines):
    """A random model, sampling freely under the JSON grammar: every gap holds at most the bound.
    On the session's pipelined tiny engine (conftest)."""
    engine = tiny_engines[2]
    params = [SamplingParams(temperature=1.0, seed=s, max_tokens=120) for s in range(6)]
    outs = engine.generate([f"JSON {i}:" for i in range(6)], params, ResponseFormat("json_object"))
    for out in outs:
        assert max(whitespace_runs_outside_strings(out.text), default=0) <= JSON_MAX_WHITESPACE, out.text
    text = "".join(o.text for o in outs)
    assert sum(ch.isspace() for ch in text) < 0.5 * len(text)


def test_a_number_no_double_holds_keeps_the_result_valid_json(compiler):
    c = compiler.make(ResponseFormat("json_schema", schema={"type": "number"}))
    for b in b"1e3034":
        c.advance(b)
    assert c.advance(ByteTokenizer().eos_token_ids[0])
    result = c.result()
    assert result["complete"] and result["text"] == "1e3034" and result["json"] is None
    assert "out of the range" in result["json_error"]
    json.dumps(result, allow_nan=False)          # what the server's JSON response does


def nested(levels: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def test_a_schema_nested_past_the_limit_is_a_constraint_error(compiler):
    compiler.make(ResponseFormat("json_schema", schema=nested(20)))
    for levels in (98, 2000):
        with pytest.raises(ConstraintError, match="nests deeper"):
            ResponseFormat("json_schema", schema=nested(levels))
