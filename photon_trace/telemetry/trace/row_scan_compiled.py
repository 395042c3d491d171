"""A chunk line's row sections read by the compiled scanner (``_row_scan.c``), one pass each.

The numpy reader (``row_scan.py``) makes about a dozen array passes over a line's bytes: 40-68 MB
of text a second on one core here, and a 10M-span file's 1.1 GB took ~10 s to import on two. The
compiled scanner reads a section's rows in one pass, without the GIL, straight into column
buffers. It accepts only what ``row_scan.py`` proves plain (the same rules, checked as it goes);
anything else, or an install without the compiled module (no compiler; a copy run from the
source tree), returns None and the caller reads the line with numpy, then with the JSON parser.

Only the writer's layout is read here: ``{"chunk":N`` then row sections of known kinds, each
once; from the first member that is not one (``dropped``, anything unexpected) the rest of the
line is left to the JSON parser, with ``{"chunk":N``, as ``row_scan.scan_chunk`` leaves it.
"""
from __future__ import annotations

import re

import numpy as np

try:
    from photon_trace.telemetry.trace import _row_scan
except ImportError:     # pragma: no cover - an install without a compiler
    _row_scan = None

_CHUNK = re.compile(rb'\{"chunk":-?[0-9]+')
_SECTION = re.compile(rb',"([A-Za-z_]+)":\[')


def available() -> bool:
    """Whether the compiled scanner is installed (else large files are read with numpy only)."""
    return _row_scan is not None


def scan_chunk(line: bytes, types: dict[str, tuple[type, ...]], older: dict[str, int] | None = None
               ) -> tuple[bytes, dict[str, list]] | None:
    """As ``row_scan.scan_chunk``: the line without its row sections, and those sections' fields
    (int64 or bool arrays; for text, int32 codes and their strings in order of first appearance);
    None when the compiled scanner is missing or cannot prove the line plain."""
    if _row_scan is None or (head := _CHUNK.match(line)) is None:
        return None
    pos, found = head.end(), {}
    while (m := _SECTION.match(line, pos)) is not None:
        name = m.group(1).decode("ascii")
        if name not in types or name in found:
            break
        got = _section(line, m.end() - 1, types[name], (older or {}).get(name))
        if got is None:
            return None
        found[name], pos = got
    return line[:head.end()] + line[pos:], found


def _section(line: bytes, at: int, types: tuple[type, ...], narrow: int | None) -> tuple[list, int] | None:
    """The section whose ``[`` is at ``at``: its fields and the index past it. An older file's
    narrower rows (``narrow`` fields) get -1 for the fields they lack, as in ``row_scan.py``."""
    got = _read(line, at, types)
    if got is None and narrow:
        got = _read(line, at, types[:narrow])
        if got is not None and got[0]:
            n = len(got[0][0][0] if isinstance(got[0][0], tuple) else got[0][0])
            got[0].extend(np.full(n, -1, dtype=np.int64) for _ in types[narrow:])
    return got


def _read(line: bytes, at: int, types: tuple[type, ...]) -> tuple[list, int] | None:
    # a row is at least 2 * width + 1 bytes and a comma: the most rows the rest of the line holds
    # (no pass to count them); the loader copies the rows read out of these buffers
    # (``row_columns.py``), so what it keeps is their size, not this bound's (2-4x it)
    cap = (len(line) - at) // (2 * len(types) + 2) + 1
    kinds = "".join("s" if t is str else "b" if t is bool else "i" for t in types)
    ints = np.empty((kinds.count("i"), cap), dtype=np.int64)
    flags = np.empty((kinds.count("b"), cap), dtype=np.uint8)
    codes = np.empty((kinds.count("s"), cap), dtype=np.int32)
    got = _row_scan.scan_rows(line, at, kinds, cap, ints, flags, codes)
    if got is None:
        return None
    end, rows, distinct = got
    if not rows:
        return [], end
    try:     # each occurrence equals its first byte for byte: checking the distinct ones is enough
        strings = [[line[o:o + n].decode("utf-8") for o, n in field] for field in distinct]
    except UnicodeDecodeError:
        return None
    out, seen = [], {"i": 0, "b": 0, "s": 0}
    for kind in kinds:
        k = seen[kind]
        seen[kind] += 1
        if kind == "s":
            out.append((codes[k, :rows], strings[k]))
        elif kind == "b":
            out.append(flags[k, :rows].view(bool))
        else:
            out.append(ints[k, :rows])
    return out, end
