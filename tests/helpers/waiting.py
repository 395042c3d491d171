"""Waiting for a condition in tests: poll it until a deadline, never sleep a guessed time.

A test that sleeps "long enough" for something to happen fails on a slower machine and
wastes time on a faster one; a deadline only bounds how long a broken run hangs, so it
can be generous.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.01   # how often the condition is looked at: the only cost of a quick success


def wait_until(condition: Callable[[], T], timeout_s: float = 30.0, what: str = "the condition") -> T:
    """Return the first truthy value of ``condition()``; raise TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    idle = threading.Event()          # never set: its wait() is an interruptible pause
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout_s:.0f} s")
        idle.wait(POLL_S)
