"""Constrained decoding: response formats compiled into per-sequence `Constraint`s.

`ResponseFormat` says what a request's output must look like; a `ConstraintCompiler` (one
per engine) turns it into a cached program when the request is added and starts a
`Constraint` per sequence; `apply_bitmask_` masks logits on the device.
"""
from __future__ import annotations

from photon_trace.engine.constraints.bitmask import apply_bitmask_, pack_bitmask, unpack_bitmask
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
    "apply_bitmask_", "grammar_vocab", "hf_vocab_bytes", "make_constraint", "pack_bitmask", "spatial_vocab",
    "unpack_bitmask",
]


def __getattr__(name: str):
    # GrammarConstraint needs xgrammar; import it only when asked for
    if name == "GrammarConstraint":
        from photon_trace.engine.constraints.grammar import GrammarConstraint
        return GrammarConstraint
    raise AttributeError(name)
