"""Spatial skills: `point` and `detect` as tiny hand-written state machines over bin tokens.

An answer is a cycle of fields repeated up to ``max_count`` times, then EOS:
``point`` cycles (x, y) coordinate bins; ``detect`` cycles (x_center, y_center) coordinate
bins then (width, height) size bins. A bin decodes to its centre, ``(bin + 0.5) / num_bins``,
a normalised float in (0, 1). Every allowed set is one of a handful of masks, built once per
vocabulary layout, so ``fill_mask`` is a single copy and ``advance`` a few integer ops.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from photon_trace.engine.constraints.interface import Constraint, bitmask_words
from photon_trace.engine.constraints.bitmask import pack_bitmask
from photon_trace.engine.constraints.spec import ConstraintViolation


@dataclass(frozen=True, slots=True)
class SpatialVocab:
    """Where the bin tokens live in a vocabulary."""

    coord_base: int
    num_coord_bins: int
    size_base: int
    num_size_bins: int
    eos_ids: tuple[int, ...]
    vocab_size: int  # the model's vocabulary: the mask width

    def __post_init__(self) -> None:
        top = max(self.coord_base + self.num_coord_bins, self.size_base + self.num_size_bins, *self.eos_ids)
        if top > self.vocab_size:
            raise ValueError(f"bin tokens reach id {top - 1}, beyond vocab_size {self.vocab_size}")
        if not self.eos_ids:
            raise ValueError("spatial skills need an EOS token")


def _mask(vocab: SpatialVocab, ranges: list[tuple[int, int]], ids: tuple[int, ...] = ()) -> np.ndarray:
    allowed = np.zeros(bitmask_words(vocab.vocab_size) * 32, dtype=bool)
    for lo, n in ranges:
        allowed[lo:lo + n] = True
    allowed[list(ids)] = True
    return pack_bitmask(allowed)


class SpatialProgram:
    """The compiled form of one skill on one vocabulary: its field ranges and all its masks."""

    __slots__ = ("kind", "fields", "min_count", "max_count", "eos_ids", "field_masks",
                 "first_or_end_mask", "end_mask", "num_coord_bins", "num_size_bins")

    def __init__(self, kind: str, vocab: SpatialVocab, max_count: int) -> None:
        coord = (vocab.coord_base, vocab.num_coord_bins)
        size = (vocab.size_base, vocab.num_size_bins)
        if kind == "point":
            self.fields = (coord, coord)
            self.min_count = 1  # the "one or more (x, y) coordinates"
        elif kind == "detect":
            self.fields = (coord, coord, size, size)
            self.min_count = 0  # EOS at once means nothing was found
        else:
            raise ValueError(f"not a spatial skill: {kind!r}")
        self.kind = kind
        self.max_count = max_count
        self.eos_ids = frozenset(vocab.eos_ids)
        self.num_coord_bins = vocab.num_coord_bins
        self.num_size_bins = vocab.num_size_bins
        self.field_masks = tuple(_mask(vocab, [f]) for f in self.fields)
        self.first_or_end_mask = _mask(vocab, [self.fields[0]], vocab.eos_ids)
        self.end_mask = _mask(vocab, [], vocab.eos_ids)

    def new(self) -> SpatialConstraint:
        return SpatialConstraint(self)


class SpatialConstraint(Constraint):
    """One sequence's progress through a point/detect answer."""

    __slots__ = ("_program", "_bins", "_field", "_count", "_mask", "_done")

    def __init__(self, program: SpatialProgram) -> None:
        self._program = program
        self._bins: list[int] = []  # bin index of every committed field, in order
        self._field = 0             # which field of the cycle comes next
        self._count = 0             # complete points/boxes so far
        self._done = False
        self._mask = self._mask_for_state()

    def _mask_for_state(self) -> np.ndarray:
        p = self._program
        if self._field:
            return p.field_masks[self._field]
        if self._count >= p.max_count:
            return p.end_mask
        if self._count >= p.min_count:
            return p.first_or_end_mask
        return p.field_masks[0]

    def fill_mask(self, out: np.ndarray) -> None:
        np.copyto(out, self._mask)

    def advance(self, token: int) -> bool:
        p = self._program
        if self._done:
            raise ConstraintViolation(f"{p.kind}: token {token} after the answer ended")
        if self._field == 0 and token in p.eos_ids and self._count >= p.min_count:
            self._done = True
            return True
        lo, n = p.fields[self._field]
        b = token - lo
        if not 0 <= b < n or self._count >= p.max_count:
            raise ConstraintViolation(f"{p.kind}: token {token} not allowed at field {self._field} "
                                      f"after {self._count} complete")
        self._bins.append(b)
        self._field += 1
        if self._field == len(p.fields):
            self._field = 0
            self._count += 1
        self._mask = self._mask_for_state()
        return False

    def result(self) -> list[dict[str, float]]:
        """Complete points ({"x", "y"}) or boxes ({"x_min", "y_min", "x_max", "y_max"}) so far."""
        p = self._program
        nc, ns = p.num_coord_bins, p.num_size_bins
        b = self._bins
        if p.kind == "point":
            return [{"x": (b[i] + 0.5) / nc, "y": (b[i + 1] + 0.5) / nc}
                    for i in range(0, 2 * self._count, 2)]
        boxes = []
        for i in range(0, 4 * self._count, 4):
            cx, cy = (b[i] + 0.5) / nc, (b[i + 1] + 0.5) / nc
            w, h = (b[i + 2] + 0.5) / ns, (b[i + 3] + 0.5) / ns
            boxes.append({"x_min": _clip01(cx - w / 2), "y_min": _clip01(cy - h / 2),
                          "x_max": _clip01(cx + w / 2), "y_max": _clip01(cy + h / 2)})
        return boxes


def _clip01(v: float) -> float:
    return 0.0 if v < 0.0 else 1.0 if v > 1.0 else v

