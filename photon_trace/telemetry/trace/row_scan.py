"""A chunk line's rows read straight into arrays: no Python object per value (a large file's reader).

Decoding a 10M-span file with orjson makes ~100M Python ints and lists, and turning them into
columns walks them again: ~20 s. Here a chunk line is a byte array and each kind's rows are read
by array operations over it (numpy releases the GIL for them, so the inflating thread of
``line_read.py`` runs beside them):

* **Structure**: the positions of quotes, commas and brackets; a quote count's parity tells
  which lie inside strings. The rest must be exactly ``[[f,f,..,f],[f,..]]`` with the kind's
  width, nothing between a row's ``]``, its ``,`` and the next ``[``: then field *j* of row *r*
  is the bytes between two known separators.
* **Numbers**: the 8 bytes that end a field, read as one little-endian word, its leading bytes
  masked off, become 8 digits by three multiply-and-shift steps (SWAR, as simdjson does);
  longer fields take the words before it. Up to 18 digits, so any value fits int64.
* **Text**: each string field's first and last 8 bytes and its length, hashed; the distinct
  hashes give the distinct strings (checked equal, byte for byte, to the first of each), decoded
  once each. Flags are the words of ``true`` and ``false``.

It only reads what it can prove is plain JSON of the expected types: no backslash in the line,
every quote delimiting a string field, every byte outside strings, separators and signs a digit
(counted: the non-digits found must be exactly those explained), no leading zero, no control
character in a string, valid UTF-8. Anything else (an escape, a float, a wrong type or width, an
older file's narrower rows, a cut line) returns None, and the caller parses the line as before
(``rows.py``), so what loads, and every error, is what the JSON parser gives.
"""
from __future__ import annotations

import re

import numpy as np

_U64 = np.uint64
_NIBBLES = _U64(0x0F0F0F0F0F0F0F0F)
_PAIR = _U64(0x000000FF000000FF)
_MUL1 = _U64(0x000F424000000064)    # 100 + (1000000 << 32)
_MUL2 = _U64(0x0000271000000001)    # 1 + (10000 << 32)
_ALL = (1 << 64) - 1
# keep the last k bytes of a word (the highest, little-endian): the k digits that end a field
_TOP = np.array([0] + [_ALL ^ ((1 << (8 * (8 - k))) - 1) for k in range(1, 8)] + [_ALL], dtype=np.uint64)
# keep the first k bytes of a word (the lowest): the k characters that start a string
_LOW = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [_ALL], dtype=np.uint64)
_TRUE = int.from_bytes(b"true", "little")
_FALSE = int.from_bytes(b"false", "little")
_MAX_DIGITS = 18
_PROBE = 64                  # a string field's first rows, whose distinct strings are looked for in the rest
_MAX_LONG_STRINGS = 64       # distinct strings over 16 bytes a field may hold before the caller parses it
_CONTROL = re.compile("[\x00-\x1f]")
_SEPARATORS = (34, 44, 91, 93)   # " , [ ]
PAD = 8                          # zero bytes the line needs after it (a word read at its end)


def words_of(buf: np.ndarray) -> np.ndarray:
    """Every 8-byte little-endian word of ``buf``, one starting at each byte (a view, no copy)."""
    return np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, offset=0, strides=(1,))


def _eight(w: np.ndarray) -> np.ndarray:
    """Up to 8 ASCII digits in a word (first digit in the lowest byte; zero bytes lead) as a number."""
    v = w & _NIBBLES
    v = v * _U64(10) + (v >> _U64(8))
    return ((v & _PAIR) * _MUL1 + ((v >> _U64(16)) & _PAIR) * _MUL2) >> _U64(32)


class _Rows:
    """One kind's rows, ``[[..],..]``, of ``width`` fields: each field's byte range. ``sep`` and ``at``
    are the line's separators outside strings and where they lie, from this section's ``[`` to its
    ``]``; ``quotes`` and ``nondigits`` count the section's bytes."""

    def __init__(self, sep: np.ndarray, at: np.ndarray, width: int):
        self.ok = False
        w = width + 2                                        # [ then width-1 commas, ], and , or the last ]
        if len(sep) < 1 + w or (len(sep) - 1) % w:
            return
        rows = (len(sep) - 1) // w
        s, p = sep[1:].reshape(rows, w), at[1:].reshape(rows, w)
        if not ((s[:, 0] == 91).all() and (s[:, 1:width] == 44).all() and (s[:, width] == 93).all()
                and (s[:-1, width + 1] == 44).all() and s[-1, width + 1] == 93
                and (p[:, width + 1] == p[:, width] + 1).all() and (p[1:, 0] == p[:-1, width + 1] + 1).all()
                and p[0, 0] == at[0] + 1):
            return
        self.rows, self.separators = rows, len(sep)
        self.start, self.end = p[:, :width] + 1, p[:, 1:width + 1]    # field j of row r: [start, end)
        self.ok = True


def _numbers(buf: np.ndarray, words: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Integer fields (``start``, ``end``: fields by rows) as int64, the same shape, and how many
    signs they hold; None unless each is ``-?(0|[1-9]\\d*)`` of at most 18 digits (the digits
    themselves are proved by the caller's count). A field's words past its widest are not read."""
    neg = buf[start] == 45
    first = start + neg
    n = end - first
    if not n.size or n.min() < 1 or n.max() > _MAX_DIGITS or ((buf[first] == 48) & (n > 1)).any():
        return None
    v = _eight(words[end - 8] & _TOP[np.minimum(n, 8)])
    widest = n.max(axis=1)
    for k, scale in ((1, _U64(10 ** 8)), (2, _U64(10 ** 16))):
        for f in np.flatnonzero(widest > 8 * k).tolist():     # fields by rows: each a contiguous row
            v[f] += _eight(words[end[f] - 8 * (k + 1)] & _TOP[np.clip(n[f] - 8 * k, 0, 8)]) * scale
    out = v.view(np.int64)
    np.negative(out, out=out, where=neg)
    return out, int(np.count_nonzero(neg))


def _flags(buf: np.ndarray, words: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, int] | None:
    """``true``/``false`` fields as bool and how many letters they hold; None unless each is one."""
    n = end - start
    w = words[start] & _LOW[np.minimum(n, 8)]
    true = (n == 4) & (w == _U64(_TRUE))
    if not (true | ((n == 5) & (w == _U64(_FALSE)))).all():
        return None
    return true, int(n.sum())


def _distinct(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each distinct key first appears, and each key's distinct one (``np.unique``'s
    ``return_index`` and ``return_inverse``). A field holds a few strings, nearly always all of them
    among its first rows: those are looked up by a binary search, with no sort of the whole field."""
    values, first = np.unique(key[:_PROBE], return_index=True)
    at = np.minimum(np.searchsorted(values, key), len(values) - 1)
    if (values[at] == key).all():
        return first, at
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse


def _strings(buf: np.ndarray, words: np.ndarray, start: np.ndarray, end: np.ndarray
             ) -> tuple[tuple[np.ndarray, list[str]], int] | None:
    """String fields as (int32 codes, the distinct strings) and how many non-digits they hold
    (quotes aside); None unless each is ``"..."`` of valid UTF-8 without a control character."""
    if not len(start) or (end - start).min() < 2 or not ((buf[start] == 34) & (buf[end - 1] == 34)).all():
        return None
    cs, n = start + 1, end - 1 - start - 1
    head = words[cs] & _LOW[np.minimum(n, 8)]
    tail = words[cs + n - 8] & _TOP[np.minimum(n, 8)]
    key = head * _U64(0x9E3779B97F4A7C15) ^ tail * _U64(0xC2B2AE3D27D4EB4F) ^ n.astype(np.uint64)
    first, inverse = _distinct(key)
    order = np.argsort(first)                  # the strings in order of first appearance, as the parser
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    first, inverse = first[order], rank[inverse]
    rep = first[inverse]
    if not ((head == head[rep]) & (tail == tail[rep]) & (n == n[rep])).all():
        return None    # two strings share a hash: left to the parser
    long = np.flatnonzero(n[first] > 16)     # first and last 8 bytes do not cover it: compare it whole
    if len(long) > _MAX_LONG_STRINGS:
        return None
    for g in long.tolist():
        members = np.flatnonzero(inverse == g)
        span = np.arange(int(n[first[g]]))
        if not (buf[cs[members][:, None] + span] == buf[cs[first[g]] + span]).all():
            return None
    table, nondigits = [], np.zeros(len(first), dtype=np.int64)
    for i, (a, k) in enumerate(zip(cs[first].tolist(), n[first].tolist())):
        raw = buf[a:a + k]
        try:
            text = raw.tobytes().decode("utf-8")
        except UnicodeDecodeError:
            return None
        if _CONTROL.search(text):
            return None
        table.append(text)
        nondigits[i] = int(np.count_nonzero((raw - np.uint8(48)) > 9))
    counts = np.bincount(inverse, minlength=len(first))
    return (inverse.astype(np.int32), table), int(counts @ nondigits)


def _rows(buf: np.ndarray, words: np.ndarray, sep: np.ndarray, at: np.ndarray, types: tuple[type, ...],
          quotes: int, nondigits: int) -> list | None:
    """The rows between ``at[0]`` and ``at[-1]`` as one entry per field (int64 or bool arrays; for
    text, codes and their strings), or None when they are not provably plain rows of ``types``."""
    sec = _Rows(sep, at, len(types))
    if not sec.ok:
        return None
    out, explained = [None] * len(types), sec.separators + quotes
    ints = [j for j, want in enumerate(types) if want is int]
    read = _numbers(buf, words, sec.start[:, ints].T.copy(), sec.end[:, ints].T.copy())   # all at once
    if read is None:
        return None
    for j, col in zip(ints, read[0]):
        out[j] = col
    explained += read[1]
    texts = 0
    for j, want in enumerate(types):
        if want is int:
            continue
        read = (_strings if want is str else _flags)(buf, words, sec.start[:, j], sec.end[:, j])
        if read is None:
            return None
        out[j] = read[0]
        explained += read[1]
        texts += want is str
    if quotes != 2 * sec.rows * texts or nondigits != explained:
        return None    # a quote inside a number, or a byte in one that is not a digit
    return out


_PREFIX = b'{"chunk":'
_OPEN = np.zeros(256, dtype=np.int8)
_OPEN[[91, 123]], _OPEN[[93, 125]] = 1, -1


def scan_chunk(line: bytes, types: dict[str, tuple[type, ...]], older: dict[str, int] | None = None
               ) -> tuple[bytes, dict[str, list]] | None:
    """A chunk line's row sections of the kinds in ``types`` read as arrays (``_rows``), and the line
    without them (``{"chunk":N,...}``: what else it holds, such as ``dropped``, for the JSON parser);
    None when the line is not a chunk line, holds a backslash (an escape is not read here) or any
    section is not provably plain rows (the caller then parses the whole line). A kind in ``older``
    may have rows that narrow instead (an older file's): its missing fields come back as -1."""
    if not line.startswith(_PREFIX) or b"\\" in line:
        return None
    buf = np.frombuffer(line + bytes(PAD), dtype=np.uint8)
    b = buf[:len(line)]
    # quotes, commas, brackets, braces; a few other bytes pass the two masks and are dropped below
    pos = np.flatnonzero(((b & np.uint8(0xD9)) == 0x59) | ((b & np.uint8(0xF1)) == 0x20))
    ch = b[pos]
    quote = ch == 34
    qcount = np.cumsum(quote)
    # a separator with an odd count of quotes before it is inside a string
    keep = np.flatnonzero(((ch == 44) | (ch == 91) | (ch == 93) | (ch == 123) | (ch == 125)) & ((qcount & 1) == 0))
    sep, at, qbefore = ch[keep], pos[keep], qcount[keep]
    depth = np.cumsum(_OPEN[sep])
    opens = np.flatnonzero((sep == 91) & (depth == 2))     # a member of the line's object that is an array
    closes = np.flatnonzero((sep == 93) & (depth == 1))
    if len(opens) != len(closes):
        return None
    digitless = (b - np.uint8(48)) > 9
    words = words_of(buf)
    found: dict[str, list] = {}
    keep_from, pieces = 0, []
    for i, j in zip(opens.tolist(), closes.tolist()):
        lo, hi = int(at[i]), int(at[j]) + 1
        q = line.rfind(b'"', 0, lo - 2)
        name = line[q + 1:lo - 2].decode("utf-8", "replace")
        if name not in types or line[lo - 2:lo] != b'":' or line[q - 1:q] != b"," or name in found:
            continue     # not one of the row kinds: left to the parser
        if hi - lo == 2:
            rows = []
        else:
            counts = (int(qbefore[j] - qbefore[i]), int(np.count_nonzero(digitless[lo:hi])))
            rows = _rows(buf, words, sep[i:j + 1], at[i:j + 1], types[name], *counts)
            narrow = (older or {}).get(name)
            if rows is None and narrow:
                rows = _rows(buf, words, sep[i:j + 1], at[i:j + 1], types[name][:narrow], *counts)
                if rows is not None:
                    n = len(rows[0][0] if isinstance(rows[0], tuple) else rows[0])
                    rows += [np.full(n, -1, dtype=np.int64) for _ in types[name][narrow:]]
            if rows is None:
                return None
        found[name] = rows
        pieces.append(line[keep_from:q - 1])
        keep_from = hi
    pieces.append(line[keep_from:])
    return b"".join(pieces), found
