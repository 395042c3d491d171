"""The point/detect state machines: allowed sets per state, counts, decoding."""
from __future__ import annotations

import numpy as np
import pytest

from photon_trace.engine.constraints.interface import bitmask_words
from photon_trace.engine.constraints import ConstraintCompiler, ConstraintViolation, ResponseFormat
from photon_trace.engine.model.tokenizer import (
    COORD_BASE,
    NUM_COORD_BINS,
    NUM_SIZE_BINS,
    SIZE_BASE,
    ByteTokenizer,
)
from helpers.constraint_masks import allowed_ids, mask_ids

VOCAB = 2560
EOS = ByteTokenizer().eos_token_ids
COORDS = set(range(COORD_BASE, COORD_BASE + NUM_COORD_BINS))
SIZES = set(range(SIZE_BASE, SIZE_BASE + NUM_SIZE_BINS))


@pytest.fixture(scope="module")
def compiler() -> ConstraintCompiler:
    return ConstraintCompiler(ByteTokenizer(), VOCAB)


def coord(b: int) -> int:
    return COORD_BASE + b


def size(b: int) -> int:
    return SIZE_BASE + b


def test_point_needs_one_point_then_allows_eos(compiler):
    c = compiler.make(ResponseFormat("point", max_count=3))
    assert allowed_ids(c, VOCAB) == COORDS  # no empty answer
    assert not c.advance(coord(0))
    assert allowed_ids(c, VOCAB) == COORDS
    assert not c.advance(coord(NUM_COORD_BINS - 1))
    assert allowed_ids(c, VOCAB) == COORDS | set(EOS)
    assert c.advance(EOS[0])
    assert c.result() == [{"x": 0.5 / NUM_COORD_BINS, "y": (NUM_COORD_BINS - 0.5) / NUM_COORD_BINS}]


def test_point_stops_at_max_count(compiler):
    c = compiler.make(ResponseFormat("point", max_count=2))
    for b in (1, 2, 3, 4):
        assert not c.advance(coord(b))
    assert allowed_ids(c, VOCAB) == set(EOS)
    with pytest.raises(ConstraintViolation):
        c.advance(coord(5))
    assert len(c.result()) == 2


def test_detect_cycles_coordinates_then_sizes(compiler):
    c = compiler.make(ResponseFormat("detect", max_count=2))
    assert allowed_ids(c, VOCAB) == COORDS | set(EOS)
    expected = [COORDS, SIZES, SIZES, COORDS | set(EOS)]
    for token, after in zip((coord(512), coord(256), size(511), size(255)), expected, strict=True):
        assert not c.advance(token)
        assert allowed_ids(c, VOCAB) == after
    assert c.advance(EOS[0])
    (box,) = c.result()
    # centre (512.5, 256.5)/1024, size (511.5, 255.5)/1024
    assert box["x_min"] == pytest.approx((512.5 - 511.5 / 2) / 1024)
    assert box["x_max"] == pytest.approx((512.5 + 511.5 / 2) / 1024)
    assert box["y_min"] == pytest.approx((256.5 - 255.5 / 2) / 1024)
    assert box["y_max"] == pytest.approx((256.5 + 255.5 / 2) / 1024)


def test_detect_allows_an_empty_answer(compiler):
    c = compiler.make(ResponseFormat("detect"))
    assert c.advance(EOS[0])
    assert c.result() == []


def test_boxes_are_clipped_to_the_unit_square(compiler):
    c = compiler.make(ResponseFormat("detect", max_count=1))
    for token in (coord(0), coord(NUM_COORD_BINS - 1), size(NUM_SIZE_BINS - 1), size(NUM_SIZE_BINS - 1)):
        c.advance(token)
    assert allowed_ids(c, VOCAB) == set(EOS)
    half = (NUM_SIZE_BINS - 0.5) / NUM_SIZE_BINS / 2
    assert c.result() == [{"x_min": 0.0, "y_min": pytest.approx((NUM_COORD_BINS - 0.5) / NUM_COORD_BINS - half),
                           "x_max": pytest.approx(0.5 / NUM_COORD_BINS + half), "y_max": 1.0}]


def test_partial_tuples_are_not_reported(compiler):
    c = compiler.make(ResponseFormat("detect"))
    for token in (coord(1), coord(2), size(3)):
        c.advance(token)
    assert c.result() == []


@pytest.mark.parametrize("token", [65, 256, size(0), 2400])
def test_a_token_outside_the_state_is_a_violation(compiler, token):
    c = compiler.make(ResponseFormat("point"))
    with pytest.raises(ConstraintViolation):
        c.advance(token)


def test_eos_before_the_first_point_is_a_violation(compiler):
    with pytest.raises(ConstraintViolation):
        compiler.make(ResponseFormat("point")).advance(EOS[0])


def test_advance_after_the_end_is_a_violation(compiler):
    c = compiler.make(ResponseFormat("detect"))
    assert c.advance(EOS[0])
    with pytest.raises(ConstraintViolation):
        c.advance(coord(0))


def test_fill_mask_overwrites_the_row(compiler):
    c = compiler.make(ResponseFormat("point"))
    row = np.full(bitmask_words(VOCAB), -1, np.int32)
    c.fill_mask(row)
    assert mask_ids(row) == COORDS
