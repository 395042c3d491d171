"""Byte rules that xgrammar 0.2.9 misses, enforced on top of its masks.

1. Encoded surrogates. xgrammar's character classes span every code point, U+D800..U+DFFF
   included, so a JSON string or a negated class lets a 0xED lead byte be followed by
   A0..BF: bytes that are not UTF-8, which a detokenizer turns into U+FFFD. (Overlong
   forms and code points past U+10FFFF it already rejects.)
2. Raw control characters in JSON strings. A string with minLength/maxLength is lowered
   to a character class that admits U+0000..U+001F except CR and LF, which RFC 8259
   forbids (xgrammar issue #800; the fix is pending upstream).

The guard is a tiny DFA over the committed bytes: a JSON lexical state (outside a string,
inside one, just after a backslash inside one) and whether the text ends in a lone 0xED.
For each state it holds the mask of tokens still allowed and each token's next state,
both precomputed per vocabulary, so a step costs one AND of the mask row and one lookup.
"""
from __future__ import annotations

import numpy as np

from photon_trace.engine.constraints.interface import bitmask_words
from photon_trace.engine.constraints.bitmask import pack_bitmask

OUTSIDE, IN_STRING, ESCAPED = 0, 1, 2  # JSON lexical states
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_JSON_WHITESPACE = frozenset(b"\t\n\r")


def _state(lex: int, after_ed: bool) -> int:
    return lex * 2 + int(after_ed)


class ByteGuard:
    """Per-vocabulary tables of the DFA; `json_strings` adds the JSON string rules to the UTF-8 one."""

    __slots__ = ("keep", "next_state")

    START = 0  # outside any string, no pending 0xED

    def __init__(self, token_bytes: tuple[bytes, ...], vocab_size: int, *, json_strings: bool) -> None:
        n = len(token_bytes)
        nonempty = np.array([len(b) > 0 for b in token_bytes], dtype=bool)
        starts_tail = np.array([bool(b) and 0xA0 <= b[0] <= 0xBF for b in token_bytes], dtype=bool)
        ends_ed = np.array([b.endswith(b"\xed") for b in token_bytes], dtype=bool)
        has_surrogate = np.array([_has_surrogate(b) for b in token_bytes], dtype=bool)
        # Tokens that can change or break the JSON lexical state; the rest are handled in bulk.
        lexical = [i for i, b in enumerate(token_bytes)
                   if json_strings and (b"\"" in b or b"\\" in b or min(b, default=32) < 32)]

        lex_states = (OUTSIDE, IN_STRING, ESCAPED) if json_strings else (OUTSIDE,)
        self.keep: list[np.ndarray | None] = [None] * (2 * len(lex_states))
        self.next_state: list[bytes] = [b""] * (2 * len(lex_states))
        for lex in lex_states:
            for after_ed in (False, True):
                banned = has_surrogate | (starts_tail if after_ed else False)
                # Bulk rule: no quote, backslash or control byte, so the lexical state only
                # moves from ESCAPED to IN_STRING once a byte has been read.
                next_lex = np.full(n, lex, dtype=np.int8)
                if lex == ESCAPED:
                    next_lex[nonempty] = IN_STRING
                for i in lexical:
                    end, bad = _scan_json(token_bytes[i], lex)
                    next_lex[i] = end
                    banned[i] |= bad
                next_ed = np.where(nonempty, ends_ed, after_ed)
                nxt = (next_lex.astype(np.int16) * 2 + next_ed).astype(np.uint8)
                s = _state(lex, after_ed)
                # Ids past the table (padding above the tokenizer) are never allowed by
                # xgrammar; their next state is irrelevant.
                self.next_state[s] = nxt.tobytes() + bytes([s]) * max(0, vocab_size - n)
                self.keep[s] = _keep_mask(vocab_size, np.flatnonzero(banned)) if banned.any() else None

    def step(self, state: int, token: int) -> int:
        return self.next_state[state][token]


def _has_surrogate(b: bytes) -> bool:
    i = b.find(b"\xed")
    while i != -1:
        if i + 1 < len(b) and 0xA0 <= b[i + 1] <= 0xBF:
            return True
        i = b.find(b"\xed", i + 1)
    return False


def _scan_json(b: bytes, lex: int) -> tuple[int, bool]:
    """(lexical state after the bytes, whether they put a raw control character where JSON forbids it)."""
    for c in b:
        if lex == OUTSIDE:
            if c < 0x20 and c not in _JSON_WHITESPACE:
                return lex, True
            if c == _QUOTE:
                lex = IN_STRING
        elif lex == IN_STRING:
            if c < 0x20:
                return lex, True
            if c == _BACKSLASH:
                lex = ESCAPED
            elif c == _QUOTE:
                lex = OUTSIDE
        else:  # the escaped character itself; which ones are valid is xgrammar's business
            if c < 0x20:
                return lex, True
            lex = IN_STRING
    return lex, False


def _keep_mask(vocab_size: int, banned: np.ndarray) -> np.ndarray:
    keep = np.ones(bitmask_words(vocab_size) * 32, dtype=bool)
    keep[banned] = False
    return pack_bitmask(keep)
