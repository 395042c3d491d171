"""Constrained decoding: response formats compiled into per-sequence `Constraint`s.

`ResponseFormat` says what a request's output must look like; a `ConstraintCompiler` (one
per engine) turns it into a cached program when the request is added and starts a
`Constraint` per sequence, which fills its row's allowed-token bitmask on the host
(``device/masking.py`` applies it to the logits on the device).
"""
from __future__ import annotations

from photon_trace.engine.constraints.bitmask import pack_bitmask
from photon_trace.engine.constraints.compiler import (
    ConstraintCompiler,
    ConstraintProgram,
    make_constraint,
    spatial_vocab,
)
from photon_trace.engine.constraints.skills import SpatialConstraint, SpatialVocab
from photon_trace.engine.constraints.spec import (
    DEFAULT_MAX_COUNT,
    KINDS,
    ConstraintError,
    ConstraintViolation,
    ResponseFormat,
)
from photon_trace.engine.constraints.vocab import grammar_vocab, hf_vocab_bytes

__all__ = [
    "DEFAULT_MAX_COUNT", "KINDS", "ConstraintCompiler", "ConstraintError", "ConstraintProgram",
    "ConstraintViolation", "GrammarConstraint", "ResponseFormat", "SpatialConstraint", "SpatialVocab",
    "grammar_vocab", "hf_vocab_bytes", "make_constraint", "pack_bitmask", "spatial_vocab",
]


def __getattr__(name: str):
    # GrammarConstraint needs xgrammar; import it only when asked for
    if name == "GrammarConstraint":
        from photon_trace.engine.constraints.grammar import GrammarConstraint
        return GrammarConstraint
    raise AttributeError(name)
