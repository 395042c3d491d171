"""ResponseFormat validation, compile-time errors and the compiled-program cache."""
from __future__ import annotations

import re

import pytest

from helpers.constraint_masks import allowed_ids
from helpers.constraint_tokenizers import HF_PAD_TO, byte_level_bpe
from photon_trace.engine.constraints import (
    DEFAULT_MAX_COUNT,
    ConstraintCompiler,
    ConstraintError,
    ResponseFormat,
    make_constraint,
)
from photon_trace.engine.model.tokenizer import ByteTokenizer

VOCAB = 2560


@pytest.fixture(scope="module")
def compiler() -> ConstraintCompiler:
    return ConstraintCompiler(ByteTokenizer(), VOCAB)


def test_text_needs_no_constraint(compiler):
    assert compiler.make(ResponseFormat()) is None
    assert make_constraint(ResponseFormat("text"), ByteTokenizer(), VOCAB) is None


def test_schemas_are_stored_compact_in_their_own_key_order():
    a = ResponseFormat("json_schema", schema={"type": "object", "properties": {"z": {}, "a": {}}})
    b = ResponseFormat("json_schema", schema='{ "type": "object",\n  "properties": {"z": {}, "a": {}} }')
    assert a == b and hash(a) == hash(b)
    assert a.schema == '{"type":"object","properties":{"z":{},"a":{}}}'  # z before a, as written


def test_spatial_kinds_default_their_max_count():
    assert ResponseFormat("point").max_count == DEFAULT_MAX_COUNT
    assert ResponseFormat("detect", max_count=3).max_count == 3


@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="yaml"), "unknown response format kind 'yaml'"),
    (dict(kind="json_schema"), "needs a non-empty schema"),
    (dict(kind="regex", regex=""), "needs a non-empty regex"),
    (dict(kind="grammar"), "needs a non-empty grammar"),
    (dict(kind="text", regex="a+"), "regex is not used by kind 'text'"),
    (dict(kind="json_object", schema="{}"), "schema is not used by kind 'json_object'"),
    (dict(kind="point", max_count=0), "max_count must be an integer >= 1"),
    (dict(kind="detect", max_count=True), "max_count must be an integer >= 1"),
    (dict(kind="regex", regex="a", max_count=2), "max_count is only used by point and detect"),
    (dict(kind="json_schema", schema="{not json"), "JSON Schema is not valid JSON"),
    (dict(kind="json_schema", schema="[1, 2]"), "must be an object or a boolean"),
    (dict(kind="json_schema", schema={"type": "integr"}), "invalid JSON Schema at type"),
    (dict(kind="json_schema", schema={"type": "string", "pattern": "(ab"}),
     "invalid JSON Schema at pattern: '(ab' is not a 'regex'"),
    (dict(kind="json_schema", schema={"properties": {"a": {"minimum": "3"}}}),
     "invalid JSON Schema at properties/a/minimum: '3' is not of type 'number'"),
])
def test_malformed_formats_are_rejected_with_what_is_wrong(kwargs, words):
    with pytest.raises(ConstraintError, match=re.escape(words)):
        ResponseFormat(**kwargs)


@pytest.mark.parametrize("spec, words", [
    (ResponseFormat("json_schema", schema={"$ref": "#/$defs/missing"}), "invalid JSON Schema: .*missing"),
    (ResponseFormat("json_schema", schema={"type": "string", "pattern": "(?<=a)b"}),
     "invalid JSON Schema: .*Lookbehind is not supported"),
    (ResponseFormat("json_schema", schema={"type": "array", "uniqueItems": True}),
     "unsupported JSON Schema: 'uniqueItems' at \\(root\\) cannot be enforced"),
    (ResponseFormat("json_schema", schema={"type": "object", "properties": {"a": {"not": {"type": "null"}}}}),
     "unsupported JSON Schema: 'not' at /properties/a"),
    (ResponseFormat("json_schema", schema={"if": {"required": ["a"]}, "then": {"required": ["b"]}}),
     "'if' at \\(root\\), 'then' at \\(root\\)"),
    (ResponseFormat("regex", regex="[a-"), "invalid regex: Regex parsing error at position 4: Unclosed '\\['"),
    (ResponseFormat("regex", regex="(?<=a)b"), "invalid regex: .*Lookbehind is not supported"),
    (ResponseFormat("grammar", grammar='root ::= item\nitem ::= "a" | '), "invalid EBNF grammar: .*line 2"),
    (ResponseFormat("grammar", grammar="root ::= value"), 'invalid EBNF grammar: .*Rule "value" is not defined'),
    (ResponseFormat("grammar", grammar='start ::= "a"'), 'invalid EBNF grammar: .*root rule with name "root"'),
    (ResponseFormat("grammar", grammar='root ::= "a'), "invalid EBNF grammar: .*string literal"),
])
def test_invalid_grammars_raise_constraint_error_at_compile(compiler, spec, words):
    with pytest.raises(ConstraintError, match=words) as info:
        compiler.compile(spec)
    assert ".cc:" not in str(info.value)  # xgrammar's source location is stripped
    # The compiler is still usable afterwards: an engine keeps running.
    assert compiler.make(ResponseFormat("regex", regex="ok")) is not None


def test_keyword_names_used_as_property_names_or_values_are_fine(compiler):
    schema = {"type": "object", "properties": {"not": {"type": "integer"}, "if": {"enum": [{"then": 1}]}},
              "required": ["not"]}
    assert compiler.make(ResponseFormat("json_schema", schema=schema)) is not None


def test_programs_are_compiled_once_per_spec(compiler):
    spec = ResponseFormat("json_schema", schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    program = compiler.compile(spec)
    assert compiler.compile(ResponseFormat("json_schema", schema=spec.schema)) is program
    assert compiler.make(spec) is not compiler.make(spec)  # one constraint per sequence
    point = ResponseFormat("point", max_count=2)
    assert compiler.compile(point) is compiler.compile(ResponseFormat("point", max_count=2))


def test_cache_evicts_the_least_recently_used_spec():
    compiler = ConstraintCompiler(ByteTokenizer(), VOCAB, cache_size=2)
    a, b, c = (ResponseFormat("regex", regex=r) for r in ("a", "b", "c"))
    pa = compiler.compile(a)
    compiler.compile(b)
    assert compiler.compile(a) is pa  # a is now the most recent
    compiler.compile(c)               # evicts b
    assert compiler.compile(a) is pa
    assert len(compiler._cache) == 2 and b not in compiler._cache


def test_spatial_skills_need_the_byte_tokenizer():
    compiler = ConstraintCompiler(byte_level_bpe(), HF_PAD_TO)
    with pytest.raises(ConstraintError, match="kind 'point' needs a tokenizer with coordinate and size bins"):
        compiler.compile(ResponseFormat("point"))


def test_grammar_masks_never_allow_non_text_ids(compiler):
    """Specials, coordinate/size bins and the padding ids above the tokenizer are never text."""
    constraint = compiler.make(ResponseFormat("regex", regex=r"[\x00-\x7f]*"))
    eos = ByteTokenizer().eos_token_ids
    assert allowed_ids(constraint, VOCAB) == set(range(128)) | set(eos)


def test_utf8_surrogates_are_never_allowed(compiler):
    """xgrammar lets 0xED be followed by A0..BF (an encoded surrogate, not UTF-8); the guard doesn't."""
    constraint = compiler.make(ResponseFormat("json_schema", schema={"type": "string"}))
    for b in b'"\xed':
        constraint.advance(b)
    assert sorted(allowed_ids(constraint, VOCAB)) == list(range(0x80, 0xA0))  # U+D000..U+D7FF only


@pytest.mark.parametrize("schema", [{"type": "string", "maxLength": 4}, {"type": "string", "minLength": 1}])
def test_length_bounded_strings_admit_no_control_characters(compiler, schema):
    """xgrammar 0.2.9 lets raw U+0000..U+001F into length-bounded strings (invalid JSON); ours doesn't."""
    constraint = compiler.make(ResponseFormat("json_schema", schema=schema))
    constraint.advance(ord('"'))
    allowed = allowed_ids(constraint, VOCAB)
    assert not allowed & set(range(0x20)) and ord("a") in allowed

