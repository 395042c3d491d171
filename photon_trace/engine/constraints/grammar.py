"""JSON, JSON Schema, regex and EBNF outputs through xgrammar's CPU bitmask path.

Compiling a grammar against a vocabulary is the expensive part (done once per spec, at
add_request time, and cached by the ConstraintCompiler); a GrammarMatcher per sequence is
cheap to create, fills a row of the bitmask in microseconds and accepts a token in less.
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any

import numpy as np
import xgrammar as xgr

from photon_trace.engine.constraints.interface import Constraint
from photon_trace.engine.constraints.guard import ByteGuard
from photon_trace.engine.constraints.spec import ConstraintError, ConstraintViolation, ResponseFormat
from photon_trace.engine.constraints.vocab import GrammarVocab

# xgrammar prefixes C++ errors with "[hh:mm:ss] /path/file.cc:123: "; the rest is the message.
_XGR_PREFIX = re.compile(r"^\[[0-9:]+\]\s+\S+:\d+:\s*")
_CHECK_PREFIX = re.compile(r"^Check failed: \(.*?\) is false:\s*")

JSON_KINDS = ("json_object", "json_schema")
# Whitespace characters allowed between JSON tokens: unbounded, a model (a random one
# above all) fills its whole budget with spaces and newlines. Two allow "\n " style
# breaks; vLLM and SGLang bound or drop this whitespace too.
JSON_MAX_WHITESPACE = 2
_WHAT = {"json_schema": "JSON Schema", "regex": "regex", "grammar": "EBNF grammar", "json_object": "JSON grammar"}


# Keywords xgrammar 0.2.9 accepts but does not enforce: outputs could break them, so a schema
# using them is rejected rather than half-honoured. (allOf and oneOf are approximated, with
# a warning from xgrammar, and are let through.)
UNENFORCED_KEYWORDS = ("not", "if", "then", "else", "dependentRequired", "dependentSchemas")
# Values that are instances or names, not subschemas: never searched for keywords.
_NOT_SCHEMAS = ("enum", "const", "default", "examples", "required", "description", "title")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def unenforced_keywords(schema: Any, path: str = "") -> list[str]:
    """'keyword at path' for every keyword of `schema` the grammar would silently ignore."""
    found = []
    if isinstance(schema, list):
        for i, sub in enumerate(schema):
            found += unenforced_keywords(sub, f"{path}/{i}")
    elif isinstance(schema, dict):
        for key, value in schema.items():
            where = f"{path}/{key}"
            if key in UNENFORCED_KEYWORDS or (key == "uniqueItems" and value is True):
                found.append(f"{key!r} at {path or '(root)'}")
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                for name, sub in value.items():
                    found += unenforced_keywords(sub, f"{where}/{name}")
            elif key not in _NOT_SCHEMAS:
                found += unenforced_keywords(value, where)
    return found


def _xgr_message(e: Exception) -> str:
    text = str(e).strip()
    text = _XGR_PREFIX.sub("", text)
    text = _CHECK_PREFIX.sub("", text)
    return text.splitlines()[0] if text else type(e).__name__


class GrammarBackend:
    """xgrammar's view of one tokenizer at one model vocabulary size."""

    __slots__ = ("vocab", "vocab_size", "_guards", "_compiler")

    def __init__(self, vocab: GrammarVocab, vocab_size: int) -> None:
        if len(vocab.token_bytes) > vocab_size:
            # Ids past the model's vocabulary can never be sampled; drop them.
            vocab = GrammarVocab(vocab.token_bytes[:vocab_size], vocab.eos_ids)
        if any(i >= vocab_size for i in vocab.eos_ids):
            raise ConstraintError(f"EOS ids {vocab.eos_ids} lie outside the model vocabulary of {vocab_size}")
        self.vocab = vocab
        self.vocab_size = vocab_size
        self._guards: dict[bool, ByteGuard] = {}  # by "is a JSON kind", built on first use
        # Ids between the tokenizer's size and the model's are padding: xgrammar treats them
        # as special tokens, never allowed.
        info = xgr.TokenizerInfo(list(vocab.token_bytes), xgr.VocabType.RAW,
                                 vocab_size=vocab_size, stop_token_ids=list(vocab.eos_ids))
        self._compiler = xgr.GrammarCompiler(info, max_threads=min(8, os.cpu_count() or 1),
                                             cache_enabled=False)  # ConstraintCompiler caches

    def compile(self, spec: ResponseFormat) -> GrammarProgram:
        c = self._compiler
        compile_kind = {
            # Any object (not any value): strict_mode=False lets its properties be anything.
            "json_object": lambda: c.compile_json_schema('{"type": "object"}', strict_mode=False,
                                                         max_whitespace_cnt=JSON_MAX_WHITESPACE),
            "json_schema": lambda: c.compile_json_schema(spec.schema, max_whitespace_cnt=JSON_MAX_WHITESPACE),
            "regex": lambda: c.compile_regex(spec.regex),
            "grammar": lambda: c.compile_grammar(spec.grammar),
        }.get(spec.kind)
        if compile_kind is None:
            raise ValueError(f"not a grammar kind: {spec.kind!r}")
        if spec.kind == "json_schema":
            ignored = unenforced_keywords(spec.schema_value)
            if ignored:
                raise ConstraintError(f"unsupported JSON Schema: {', '.join(ignored)} cannot be enforced while "
                                      f"decoding (not, if/then/else, dependentRequired, dependentSchemas and "
                                      f"uniqueItems are not supported)")
        try:
            compiled = compile_kind()
        except (RuntimeError, ValueError, TypeError) as e:
            raise ConstraintError(f"invalid {_WHAT[spec.kind]}: {_xgr_message(e)}") from None
        return GrammarProgram(spec.kind, compiled, self.vocab, self._guard(json_strings=spec.kind in JSON_KINDS))

    def _guard(self, json_strings: bool) -> ByteGuard:
        guard = self._guards.get(json_strings)
        if guard is None:
            guard = self._guards[json_strings] = ByteGuard(self.vocab.token_bytes, self.vocab_size,
                                                           json_strings=json_strings)
        return guard


class GrammarProgram:
    """A grammar compiled against a vocabulary; `new()` starts a sequence on it."""

    __slots__ = ("kind", "compiled", "vocab", "guard", "eos_ids")

    def __init__(self, kind: str, compiled: xgr.CompiledGrammar, vocab: GrammarVocab,
                 guard: ByteGuard) -> None:
        self.kind = kind
        self.compiled = compiled
        self.vocab = vocab
        self.guard = guard
        self.eos_ids = frozenset(vocab.eos_ids)

    def new(self) -> GrammarConstraint:
        return GrammarConstraint(self)


class GrammarConstraint(Constraint):
    """One sequence's xgrammar matcher. Its accepting end is EOS accepted after a complete match."""

    __slots__ = ("_program", "_matcher", "_tokens", "_guard_state")

    def __init__(self, program: GrammarProgram) -> None:
        self._program = program
        self._matcher = xgr.GrammarMatcher(program.compiled)
        self._tokens: list[int] = []  # committed text tokens (EOS excluded)
        self._guard_state = ByteGuard.START

    def fill_mask(self, out: np.ndarray) -> None:
        # A numpy row is passed straight through DLPack: zero-copy, no tensor wrapper needed.
        self._matcher.fill_next_token_bitmask(out)
        keep = self._program.guard.keep[self._guard_state]
        if keep is not None:
            np.bitwise_and(out, keep, out=out)

    def advance(self, token: int) -> bool:
        if not self._matcher.accept_token(token):
            raise ConstraintViolation(f"{self._program.kind}: token {token} rejected after "
                                      f"{len(self._tokens)} tokens")
        if token not in self._program.eos_ids:
            self._tokens.append(token)
            self._guard_state = self._program.guard.next_state[self._guard_state][token]
        return self._matcher.is_terminated()

    @property
    def text(self) -> str:
        table = self._program.vocab.token_bytes
        return b"".join(table[t] for t in self._tokens).decode("utf-8", errors="replace")

    def result(self) -> dict[str, Any]:
        """{"text", "complete"} and, for the JSON kinds once complete, "json": the parsed value."""
        text = self.text
        complete = self._matcher.is_completed()
        out: dict[str, Any] = {"text": text, "complete": complete}
        if self._program.kind in JSON_KINDS:
            try:
                out["json"] = json.loads(text, parse_float=_finite_float) if complete else None
            except json.JSONDecodeError:
                out["json"] = None
            except ValueError as e:   # a legal number no double holds (1e3034): the text keeps it
                out["json"], out["json_error"] = None, str(e)
        return out


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of the range of a double; see `text`")
    return value
