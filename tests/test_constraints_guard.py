"""The byte guard's DFA: JSON string rules and encoded surrogates, over multi-byte tokens too."""
from __future__ import annotations

import numpy as np
import pytest

from photon_trace.engine.constraints.guard import ESCAPED, IN_STRING, OUTSIDE, ByteGuard

TOKENS = (b"", b"a", b'"', b"\\", b"\t", b"\x01", b'a"\t', b'"\t', b"\xed", b"\xa0", b"\x80", b"x\xed\xa0\x80",
          b"\\\t", b'\\"')
ID = {b: i for i, b in enumerate(TOKENS)}
VOCAB = 64  # padded above the table


def allowed(guard: ByteGuard, state: int) -> set[bytes]:
    keep = guard.keep[state]
    if keep is None:
        return set(TOKENS)
    bits = np.unpackbits(keep.view(np.uint8), bitorder="little")
    return {b for i, b in enumerate(TOKENS) if bits[i]}


def walk(guard: ByteGuard, *tokens: bytes) -> int:
    state = ByteGuard.START
    for t in tokens:
        assert t in allowed(guard, state), t
        state = guard.step(state, ID[t])
    return state


@pytest.fixture(scope="module")
def json_guard() -> ByteGuard:
    return ByteGuard(TOKENS, VOCAB, json_strings=True)


def test_outside_strings_only_json_whitespace_controls_are_allowed(json_guard):
    ok = allowed(json_guard, walk(json_guard))
    assert b"\t" in ok and b"\x01" not in ok
    assert b'"\t' not in ok    # opens a string, then a raw tab inside it
    assert b'a"\t' not in ok


def test_inside_a_string_no_raw_control_is_allowed(json_guard):
    state = walk(json_guard, b'"')
    assert state // 2 == IN_STRING
    ok = allowed(json_guard, state)
    assert b"\t" not in ok and b"\x01" not in ok
    assert b'a"\t' in ok       # closes the string first: the tab is whitespace outside it
    assert walk(json_guard, b'"', b'a"\t') // 2 == OUTSIDE


def test_escapes_keep_the_string_open(json_guard):
    assert walk(json_guard, b'"', b"\\") // 2 == ESCAPED
    assert walk(json_guard, b'"', b"\\", b'"') // 2 == IN_STRING  # an escaped quote
    assert walk(json_guard, b'"', b'\\"') // 2 == IN_STRING
    assert b"\\\t" not in allowed(json_guard, walk(json_guard, b'"'))


@pytest.mark.parametrize("json_strings", [False, True])
def test_no_surrogate_is_ever_encoded(json_guard, json_strings):
    guard = json_guard if json_strings else ByteGuard(TOKENS, VOCAB, json_strings=False)
    assert b"x\xed\xa0\x80" not in allowed(guard, ByteGuard.START)
    after_ed = walk(guard, b"\xed")
    assert b"\xa0" not in allowed(guard, after_ed) and b"\x80" in allowed(guard, after_ed)
    assert b"\xa0" in allowed(guard, walk(guard, b"\xed", b"\x80"))


def test_tokens_without_bytes_leave_the_state_alone(json_guard):
    state = walk(json_guard, b'"', b"\xed")
    assert json_guard.step(state, ID[b""]) == state
    assert json_guard.step(state, VOCAB - 1) == state  # padding id above the tokenizer


def test_plain_guard_ignores_json_lexing():
    guard = ByteGuard(TOKENS, VOCAB, json_strings=False)
    assert len(guard.keep) == 2
    assert {b"\t", b"\x01", b'"\t'} <= allowed(guard, walk(guard, b'"'))
