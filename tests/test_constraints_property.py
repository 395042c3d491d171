"""Every finished output under a constraint is valid, whatever the logits.

A batch decoding loop with random (seeded) logits: constrained rows get their masks filled
on the host and applied with apply_bitmask_, unconstrained rows in the same batch are left
alone, and rows finish at different steps. Sampling is greedy or random (Gumbel-max).
A row cut by the token limit is not finished and need not be valid.
"""
from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from helpers.constraint_tokenizers import HF_PAD_TO, byte_level_bpe, project_hf
from photon_trace.engine.constraints.interface import Constraint, bitmask_words
from photon_trace.engine.constraints import ConstraintCompiler, ResponseFormat
from photon_trace.engine.device.masking import apply_bitmask_
from photon_trace.engine.model.tokenizer import COORD_BASE, NUM_COORD_BINS, NUM_SIZE_BINS, SIZE_BASE, ByteTokenizer



@pytest.fixture(scope="module", autouse=True)
def one_intra_op_thread():
    """Small tensors on a shared 2-core machine: a second torch thread only adds waiting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------- tokenizers

BYTE_VOCAB = 2560


@cache
def setup(name: str) -> tuple[Any, ConstraintCompiler, int, int]:
    """(tokenizer, compiler, model vocab size, token limit) by name."""
    if name == "byte":
        tok, vocab, limit = ByteTokenizer(), BYTE_VOCAB, 320
    elif name == "transformers":
        tok, vocab, limit = byte_level_bpe(), HF_PAD_TO, 200
    else:
        tok, vocab, limit = project_hf(name), HF_PAD_TO, 200
    return tok, ConstraintCompiler(tok, vocab), vocab, limit


def tokenizer_size(tok: Any) -> int:
    return tok.vocab_size if hasattr(tok, "token_bytes") else len(tok)  # transformers: len counts added tokens


def streamed_text(tok: Any, tokens: list[int]) -> str:
    """The text the tokenizer itself makes of `tokens` (specials dropped)."""
    if hasattr(tok, "decode_bytes"):
        return tok.decode_bytes(tokens).decode()
    return tok.decode(tokens, skip_special_tokens=True)


@cache
def closing_bias(name: str) -> torch.Tensor:
    """+2 for tokens that close a string, object, list or group: random outputs then end sooner."""
    tok, _, vocab, _ = setup(name)
    bias = torch.zeros(vocab)
    for i in range(tokenizer_size(tok)):
        if any(c in tok.decode([i]) for c in '"}])'):
            bias[i] = 2.0
    return bias


def eos_ids(tok: Any) -> tuple[int, ...]:
    ids = getattr(tok, "eos_token_ids", None) or tok.eos_token_id  # ours: a tuple; transformers: an int
    return (ids,) if isinstance(ids, int) else tuple(ids)


# ---------------------------------------------------------------- formats and their validators

REGEXES = [
    r"[a-z]{1,8}@[a-z]{1,8}\.(com|org|net)",
    r"\d{3}-\d{4}",
    r"(yes|no|maybe)",
    r"[A-Z][a-z]{0,6}( [A-Z][a-z]{0,6}){0,3}",
    r"-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,3})?",
    r"#[0-9a-fA-F]{6}",
    r"(ab|cd)*e?",
    r"[^\n\"]{0,10}",  # a negated class: multi-byte UTF-8 characters too
]

ARITHMETIC = r"""
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= "0" | [1-9] [0-9]*
"""
NESTED_LISTS = r"""root ::= "[" (root ("," root)*)? "]" """
KEY_VALUES = r"""
root ::= pair ("," pair)*
pair ::= key "=" value
key ::= [a-z]+
value ::= [0-9]+ | "'" [a-z ]* "'"
"""


def valid_arithmetic(text: str) -> bool:
    allowed = (ast.Expression, ast.BinOp, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.Div)
    return all(isinstance(node, allowed) for node in ast.walk(ast.parse(text, mode="eval")))


def valid_nested_lists(text: str) -> bool:
    def only_lists(v: Any) -> bool:
        return isinstance(v, list) and all(only_lists(x) for x in v)
    return " " not in text and only_lists(json.loads(text))


GRAMMARS = {
    ARITHMETIC: valid_arithmetic,
    NESTED_LISTS: valid_nested_lists,
    KEY_VALUES: lambda t: re.fullmatch(r"[a-z]+=([0-9]+|'[a-z ]*')(,[a-z]+=([0-9]+|'[a-z ]*'))*", t) is not None,
}

names = st.from_regex(r"[a-z_]{1,6}", fullmatch=True)
leaf_schemas = st.one_of(
    st.sampled_from([{"type": "boolean"}, {"type": "null"}, {"type": "integer"}, {"type": "number"},
                     {"type": "string", "pattern": "^[a-z]{1,6}$"}, {"const": "fixed"}]),
    st.builds(lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
              st.integers(-1000, 1000), st.integers(0, 5000)),
    st.builds(lambda lo, span: {"type": "string", "minLength": lo, "maxLength": lo + span},
              st.integers(0, 3), st.integers(0, 8)),
    st.lists(st.one_of(st.text(max_size=5), st.integers(-9, 99), st.booleans(), st.none()),
             min_size=1, max_size=4, unique_by=json.dumps).map(lambda v: {"enum": v}),
)


@st.composite
def object_schemas(draw: st.DrawFn, children: st.SearchStrategy) -> dict:
    props = draw(st.dictionaries(names, children, max_size=4))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    return {"type": "object", "properties": props, "required": required}


schemas = st.recursive(
    leaf_schemas,
    lambda children: st.one_of(
        object_schemas(children),
        st.builds(lambda item, lo, span: {"type": "array", "items": item, "minItems": lo, "maxItems": lo + span},
                  children, st.integers(0, 2), st.integers(0, 3)),
        st.lists(children, min_size=2, max_size=3).map(lambda xs: {"anyOf": xs}),
    ),
    max_leaves=8,
)


def formats(kind: str) -> st.SearchStrategy[ResponseFormat]:
    if kind == "json_object":
        return st.just(ResponseFormat("json_object"))
    if kind == "json_schema":
        return st.one_of(object_schemas(schemas), schemas).map(lambda s: ResponseFormat("json_schema", schema=s))
    if kind == "regex":
        return st.sampled_from(REGEXES).map(lambda r: ResponseFormat("regex", regex=r))
    if kind == "grammar":
        return st.sampled_from(sorted(GRAMMARS)).map(lambda g: ResponseFormat("grammar", grammar=g))
    return st.integers(1, 5).map(lambda n: ResponseFormat(kind, max_count=n))


def parsed(text: str, result: dict) -> Any:
    """The value ``result["json"]`` must hold: the text's, unless a number in it is past a
    double's range (``598e728``), which leaves ``json`` null and says so in ``json_error``."""
    value = json.loads(text)
    if any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(value)):
        assert "json_error" in result
        return None
    return value


def _leaves(value: Any):
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def check_valid(spec: ResponseFormat, result: Any, tokens: list[int], tok: Any) -> None:
    """Assert a finished output is what its format promises."""
    if spec.is_spatial:
        n = len(result)
        per_item = 2 if spec.kind == "point" else 4
        assert len(tokens) == per_item * n + 1 and tokens[-1] in eos_ids(tok)
        assert (1 if spec.kind == "point" else 0) <= n <= spec.max_count
        for i, t in enumerate(tokens[:-1]):
            is_size = spec.kind == "detect" and i % 4 >= 2
            lo, bins = (SIZE_BASE, NUM_SIZE_BINS) if is_size else (COORD_BASE, NUM_COORD_BINS)
            assert lo <= t < lo + bins
        for item in result:
            assert all(0.0 <= v <= 1.0 for v in item.values())
            if spec.kind == "point":
                assert set(item) == {"x", "y"}
            else:
                assert set(item) == {"x_min", "y_min", "x_max", "y_max"}
                assert item["x_min"] <= item["x_max"] and item["y_min"] <= item["y_max"]
        return
    text = result["text"]
    assert result["complete"]
    assert tokens[-1] in eos_ids(tok)
    # The text the constraint matched is the text the tokenizer streams.
    assert text == streamed_text(tok, tokens)
    if spec.kind == "json_object":
        assert isinstance(json.loads(text), dict) and result["json"] == parsed(text, result)
    elif spec.kind == "json_schema":
        value = json.loads(text)
        jsonschema.validate(value, spec.schema_value)
        assert result["json"] == parsed(text, result)
    elif spec.kind == "regex":
        assert re.fullmatch(spec.regex, text), (spec.regex, text)
    else:
        assert GRAMMARS[spec.grammar](text), text


# ---------------------------------------------------------------- the decoding loop


@dataclass
class Row:
    spec: ResponseFormat | None
    constraint: Constraint | None
    tokens: list[int] = field(default_factory=list)
    finished: bool = False


def decode(name: str, specs: list[ResponseFormat | None], seed: int, greedy: bool, eos_bias: float) -> list[Row]:
    tok, compiler, vocab, limit = setup(name)
    rows = [Row(s, None if s is None else compiler.make(s)) for s in specs]
    eos = eos_ids(tok)
    bias = closing_bias(name).clone()
    bias[list(eos)] += eos_bias
    host = np.zeros((len(rows), bitmask_words(vocab)), np.int32)
    bitmask = torch.from_numpy(host)  # zero-copy: the mask rows are written through `host`
    gen = torch.Generator().manual_seed(seed)
    for _ in range(limit):
        active = [b for b, r in enumerate(rows) if not r.finished]
        if not active:
            break
        masked = [b for b in active if rows[b].constraint is not None]
        for b in masked:
            host[b] = 0
            rows[b].constraint.fill_mask(host[b])
        logits = torch.randn(len(rows), vocab, generator=gen) + bias
        before = logits.clone()
        if masked:
            apply_bitmask_(logits, bitmask, torch.tensor(masked, dtype=torch.int64))
        untouched = [b for b in range(len(rows)) if b not in masked]
        assert torch.equal(logits[untouched], before[untouched])
        if not greedy:
            uniform = torch.rand(logits.shape, generator=gen).clamp_(1e-12, 1.0)
            logits = logits - torch.log(-torch.log(uniform))  # Gumbel-max: a categorical draw
        next_tokens = logits.argmax(dim=-1).tolist()
        for b in active:
            row, t = rows[b], next_tokens[b]
            row.tokens.append(t)
            if row.constraint is None:
                row.finished = t in eos
            else:
                row.finished = row.constraint.advance(t)  # raises on a token the mask did not allow
    return rows


def batches(kind: str, spatial_ok: bool) -> st.SearchStrategy[list[ResponseFormat | None]]:
    """1-3 rows of `kind`, maybe an unconstrained row, maybe a row of another kind, shuffled."""
    others = ["json_object", "regex", "grammar"] + (["point", "detect"] if spatial_ok else [])
    other = st.sampled_from(others).flatmap(formats)
    return st.tuples(
        st.lists(formats(kind), min_size=1, max_size=3),
        st.lists(st.none(), max_size=1),
        st.lists(other, max_size=1),
    ).flatmap(lambda parts: st.permutations([*parts[0], *parts[1], *parts[2]]))


CASES = [(k, t) for k in ("json_object", "json_schema", "regex", "grammar")
         for t in ("byte", "byte_level", "byte_fallback")]
CASES += [("json_schema", "transformers"), ("point", "byte"), ("detect", "byte")]


@pytest.mark.parametrize("kind, tokenizer", CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), greedy=st.booleans(),
       eos_bias=st.sampled_from([0.0, 3.0, 8.0]))
def test_every_finished_output_is_valid(kind, tokenizer, data, seed, greedy, eos_bias):
    specs = data.draw(batches(kind, spatial_ok=tokenizer == "byte"))
    tok = setup(tokenizer)[0]
    for row in decode(tokenizer, specs, seed, greedy, eos_bias):
        if row.spec is not None:
            event(f"{row.spec.kind} {'finished' if row.finished else 'cut at the token limit'}")
        if row.finished and row.spec is not None:
            check_valid(row.spec, row.constraint.result(), row.tokens, tok)


@pytest.mark.parametrize("kind, tokenizer", CASES)
def test_most_random_runs_finish(kind, tokenizer):
    """The property test is not vacuous: with a bias toward EOS, most rows end within the limit."""
    spec = {
        "json_object": ResponseFormat("json_object"),
        "json_schema": ResponseFormat("json_schema", schema={
            "type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                             "n": {"type": "integer"}, "tags": {"type": "array", "maxItems": 2,
                                                                                "items": {"enum": ["a", "b"]}}},
            "required": ["name", "n"]}),
        "regex": ResponseFormat("regex", regex=REGEXES[0]),
        "grammar": ResponseFormat("grammar", grammar=ARITHMETIC),
        "point": ResponseFormat("point", max_count=3),
        "detect": ResponseFormat("detect", max_count=3),
    }[kind]
    rows = decode(tokenizer, [spec] * 8, seed=1234, greedy=False, eos_bias=3.0)
    tok = setup(tokenizer)[0]
    finished = [r for r in rows if r.finished]
    assert len(finished) >= 4, f"{len(finished)}/8 finished"
    for row in finished:
        check_valid(spec, row.constraint.result(), row.tokens, tok)
