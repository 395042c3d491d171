"""ConstraintCompiler: response formats to per-sequence constraints, compiled once per spec.

The engine owns one compiler for its tokenizer and model vocabulary. `compile` does all
the expensive work (vocabulary conversion, grammar compilation, mask tables) and is called
when a request is added, so errors surface there and the decode loop only ever creates a
matcher from a cached program.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Protocol

from photon_trace.engine.constraints.interface import Constraint
from photon_trace.engine.constraints.skills import SpatialProgram, SpatialVocab
from photon_trace.engine.constraints.spec import ConstraintError, ResponseFormat
from photon_trace.engine.constraints.vocab import grammar_vocab


class ConstraintProgram(Protocol):
    """A compiled response format; `new()` is cheap and starts one sequence on it."""

    def new(self) -> Constraint: ...


def spatial_vocab(tokenizer: Any, vocab_size: int) -> SpatialVocab | None:
    """Where our ByteTokenizer keeps its coordinate and size bins; None for other tokenizers."""
    try:
        import photon_trace.engine.model.tokenizer as tok
    except ImportError:
        return None
    if not isinstance(tokenizer, tok.ByteTokenizer):
        return None
    return SpatialVocab(coord_base=tok.COORD_BASE, num_coord_bins=tok.NUM_COORD_BINS,
                        size_base=tok.SIZE_BASE, num_size_bins=tok.NUM_SIZE_BINS,
                        eos_ids=tuple(tokenizer.eos_token_ids), vocab_size=vocab_size)


class ConstraintCompiler:
    """Compiles and caches programs for one (tokenizer, model vocabulary size).

    Thread-safe, so a server thread may compile while the engine decodes. The grammar
    backend (vocabulary conversion, xgrammar tokenizer info) is built on first use.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, *, cache_size: int = 256) -> None:
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be positive, got {vocab_size}")
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.cache_size = cache_size
        self._cache: OrderedDict[ResponseFormat, ConstraintProgram] = OrderedDict()
        self._grammar = None  # GrammarBackend, built on first use
        self._spatial: SpatialVocab | None = spatial_vocab(tokenizer, vocab_size)
        self._lock = threading.Lock()

    def compile(self, spec: ResponseFormat) -> ConstraintProgram | None:
        """The program for `spec` (None for plain text); raises ConstraintError if it is invalid."""
        if not spec.is_constrained:
            return None
        with self._lock:
            program = self._cache.get(spec)
            if program is not None:
                self._cache.move_to_end(spec)
                return program
            program = self._build(spec)
            self._cache[spec] = program
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            return program

    def make(self, spec: ResponseFormat) -> Constraint | None:
        """A fresh constraint for one sequence (None for plain text)."""
        program = self.compile(spec)
        return None if program is None else program.new()

    def _build(self, spec: ResponseFormat) -> ConstraintProgram:
        if spec.is_spatial:
            if self._spatial is None:
                raise ConstraintError(f"kind {spec.kind!r} needs a tokenizer with coordinate and size bins "
                                      f"(the built-in byte tokenizer); {type(self.tokenizer).__name__} has none")
            return SpatialProgram(spec.kind, self._spatial, spec.max_count)
        if self._grammar is None:
            # xgrammar is imported on first grammar use: the skills and the engine run without it
            from photon_trace.engine.constraints.grammar import GrammarBackend

            self._grammar = GrammarBackend(grammar_vocab(self.tokenizer), self.vocab_size)
        return self._grammar.compile(spec)


def make_constraint(spec: ResponseFormat, tokenizer: Any, vocab_size: int) -> Constraint | None:
    """One-off: compile `spec` for `tokenizer` and start a sequence on it (no caching)."""
    return ConstraintCompiler(tokenizer, vocab_size).make(spec)
