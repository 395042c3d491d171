"""Work on records in pieces, for the engine's device waits.

The recorder converts, and its sinks encode, inside the engine's device waits, a slice of
tens of microseconds at a time: such work is a generator that yields after every ``PIECE``
records, so the wait checks its event between pieces. ``run_to_end`` does the same work in
one go, outside a wait (a sink used directly, a whole trace written or exported).
"""
from __future__ import annotations

from collections.abc import Generator

PIECE = 64  # records per piece: ~20-60 us of conversion


def run_to_end(gen: Generator):
    """Drive a generator to its end; its return value."""
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value
