"""A large file's chunk lines read as arrays (the compiled scanner, ``row_scan_compiled.py``, and
numpy's, ``row_scan.py``) hold what the JSON parser reads from them, and a line they cannot prove
plain is parsed, so its records or its error are the parser's. ``COLUMNS_FROM`` and ``SCAN_FROM``
are set to 0 here so small files take that path; "parsed" is the same load with the scan switched
off. Each load test runs twice: with the compiled scanner first (as installed), and with numpy's
alone (as where it is not)."""
from __future__ import annotations

import gzip
import json
import random
import shutil
import sysconfig
import threading
import zlib
from pathlib import Path

import numpy as np
import orjson
import pytest

from photon_trace.telemetry.trace import file as trace_file
from photon_trace.telemetry.trace import row_scan, row_scan_compiled
from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.file import TraceFormatError, load_trace
from photon_trace.telemetry.trace.file_errors import read_bytes
from photon_trace.telemetry.trace.rows import ROW_TYPES

from helpers.scale_traces import write_own_trace

ROOT = Path(__file__).parents[1]
FILES = sorted((ROOT / "tests/data/golden").glob("*.trace.jsonl*")) + sorted(ROOT.glob("traces/*.trace.jsonl*"))
TYPES = {k: t for k, (_, t) in ROW_TYPES.items()}


def _records(trace):
    return (trace.header, *(list(getattr(trace, k)) for k in ROW_TYPES))


def _load(path, monkeypatch, scan: bool):
    monkeypatch.setattr(trace_file, "COLUMNS_FROM", 0)
    monkeypatch.setattr(trace_file, "SCAN_FROM", 0 if scan else 1 << 62)
    try:
        return load_trace(path)
    except TraceFormatError as e:
        return f"error: {e}"


@pytest.fixture(params=["compiled", "numpy"])
def scanner(request, monkeypatch):
    """Which scanner reads first, and how many lines the compiled one read (not None)."""
    if request.param == "numpy":
        monkeypatch.setattr(row_scan_compiled, "_row_scan", None)
        return {"name": "numpy", "read": 0}
    if not row_scan_compiled.available():
        pytest.skip("the compiled scanner is not installed (test_the_compiled_scanner_is_installed says why)")
    seen, real, lock = {"name": "compiled", "read": 0}, row_scan_compiled.scan_chunk, threading.Lock()

    def counted(*args):
        got = real(*args)
        with lock:
            seen["read"] += got is not None
        return got
    monkeypatch.setattr(row_scan_compiled, "scan_chunk", counted)
    return seen


@pytest.fixture
def scans(monkeypatch, scanner):
    """How many chunk lines the scan read (not None) and how many it left to the parser."""
    seen = {"read": 0, "parsed": 0}
    real, lock = trace_file._scan, threading.Lock()

    def counted(*args):     # called on the loader's scan threads (scan_ahead.py)
        got = real(*args)
        with lock:
            seen["read" if got is not None else "parsed"] += 1
        return got
    monkeypatch.setattr(trace_file, "_scan", counted)
    return seen


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_engine_traces_read_as_arrays_hold_what_the_parser_reads(path, monkeypatch, scans, scanner):
    as_lists = load_trace(path)
    scanned = _load(path, monkeypatch, scan=True)
    assert scans["read"] > 0 and scans["parsed"] == 0, scans
    assert scanner["read"] == (scans["read"] if scanner["name"] == "compiled" else 0), scanner
    assert all(isinstance(getattr(scanned, k), Columns) for k in ROW_TYPES)
    assert _records(scanned) == _records(_load(path, monkeypatch, scan=False)) == _records(as_lists)


def test_the_generators_ten_million_span_file_shape_reads_the_same(tmp_path, monkeypatch, scans):
    path = write_own_trace(tmp_path / "own.trace.jsonl.gz", 30_000).path
    scanned = _load(path, monkeypatch, scan=True)
    assert scans["read"] > 0 and scans["parsed"] == 0, scans
    assert len(scanned.host_spans) + len(scanned.device_spans) >= 30_000
    assert _records(scanned) == _records(_load(path, monkeypatch, scan=False))


def _chunk_line(path: Path) -> tuple[list[str], int]:
    lines = read_bytes(path)[0].decode().splitlines()
    return lines, next(i for i, line in enumerate(lines) if '"waits":[[' in line and '"host_spans":[[' in line)


# Each edit of a real chunk line: what the parser makes of it (records, or the error naming the
# line and field) must be what the load gives with the scan on.
EDITS = {
    "escaped quote in a string": lambda s: s.replace('["', '["a\\"b', 1),
    "escaped newline": lambda s: s.replace('["', '["a\\nb', 1),
    "unicode escape": lambda s: s.replace('["', '["\\u00e9', 1),
    "non-ascii text": lambda s: s.replace('["', '["ünïcode ✓ ', 1),
    "long strings": lambda s: s.replace('["', '["' + "x" * 40 + "/", 3),
    "a separator inside a string": lambda s: s.replace('["', '["a],"b":[[', 1),
    "brackets and braces in text": lambda s: s.replace('["', '["{[x]}', 2),
    "a control character": lambda s: s.replace('["', '["a\x01', 1),
    "leading zero": lambda s: s.replace(",-1,", ",01,", 1),
    "negative zero": lambda s: s.replace(",-1,", ",-0,", 1),
    "a float": lambda s: s.replace(",-1,", ",1.0,", 1),
    "an exponent": lambda s: s.replace(",-1,", ",1e3,", 1),
    "a flag where a number goes": lambda s: s.replace(",-1,", ",true,", 1),
    "a number where a flag goes": lambda s: s.replace(",true,", ",1,", 1).replace(",false,", ",0,", 1),
    "text where a number goes": lambda s: s.replace(",-1,", ',"-1",', 1),
    "a number where text goes": lambda s: s.replace('"MainThread"', "7", 1),
    "null": lambda s: s.replace(",-1,", ",null,", 1),
    "18 digits": lambda s: s.replace(",-1,", ",-999999999999999999,", 1),
    "19 digits": lambda s: s.replace(",-1,", ",1234567890123456789,", 1),
    "outside int64": lambda s: s.replace(",-1,", ",99999999999999999999,", 1),
    "a space": lambda s: s.replace(",-1,", ", -1,", 1),
    "a row too short": lambda s: s.replace(',"MainThread"]', "]", 1),
    "a row too long": lambda s: s.replace(',"MainThread"]', ',"MainThread",-1,-1,-1]', 1),
    "rows of two widths": lambda s: s.replace(',"MainThread"]', ',"MainThread",-1,-1]', 1),
    "an empty section": lambda s: s.replace('"steps":[[', '"steps":[],"x":[[', 1),
    "an unknown kind": lambda s: s.replace('"steps":', '"stepz":', 1),
    "a kind twice": lambda s: s[:-1] + ',"waits":[]}',
    "rows inside dropped": lambda s: s[:-1] + ',"dropped":{"waits":[["x"]]}}',
    "dropped counts": lambda s: s[:-1] + ',"dropped":{"waits":3}}',
    "an empty string": lambda s: s.replace('"MainThread"', '""', 1),
    "cut short": lambda s: s[: len(s) // 2],
}


READ = {"non-ascii text", "long strings", "brackets and braces in text", "negative zero", "18 digits",
        "an empty string", "an empty section", "an unknown kind", "rows inside dropped", "dropped counts"}
"""The edits the scan reads itself; it leaves every other edited line to the parser."""


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_an_edited_line_reads_as_the_parser_reads_it(edit, tmp_path, monkeypatch, scans, scanner):
    lines, i = _chunk_line(FILES[0])
    edited = EDITS[edit](lines[i])
    assert edited != lines[i]
    lines[i] = edited
    bad = tmp_path / "edited.trace.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    parsed = _load(bad, monkeypatch, scan=False)
    scanned = _load(bad, monkeypatch, scan=True)
    assert scans["parsed"] == (edit not in READ), scans
    # the compiled scanner reads every line that is read (a kind twice: it reads, the loader then parses)
    assert scanner["read"] >= scans["read"] if scanner["name"] == "compiled" else scanner["read"] == 0, scanner
    if isinstance(parsed, str):
        assert scanned == parsed
    else:
        assert _records(scanned) == _records(parsed)


def _random_line(rng: random.Random) -> str:
    def number() -> int:
        digits = rng.randint(1, 18)
        v = rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10 ** digits - 1)
        return -v if rng.random() < 0.3 else v

    def text() -> str:
        return rng.choice(["", "a", "plan", "scheduler", "x" * 8, "y" * 9, "z" * 16, "w" * 17,
                           "engine/engine.py:194 in Engine._commit", "ü", "é" * 20, "a b.c(d)_Y"])
    value = {str: text, int: number, bool: lambda: rng.random() < 0.5}
    obj = {"chunk": rng.randint(0, 10 ** 6)}
    for kind, types in TYPES.items():
        if rng.random() < 0.8:
            obj[kind] = [[value[t]() for t in types] for _ in range(rng.randint(0, 40))]
    if rng.random() < 0.3:
        obj["dropped"] = {"host_spans": 3}
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _scan_functions():
    return [row_scan.scan_chunk] + ([row_scan_compiled.scan_chunk] if row_scan_compiled.available() else [])


@pytest.mark.parametrize("scan", _scan_functions(), ids=lambda f: f.__module__.rsplit(".", 1)[-1])
def test_random_rows_read_as_the_parser_reads_them(scan):
    rng = random.Random(31)
    for _ in range(300):
        line = _random_line(rng).encode()
        obj = orjson.loads(line)
        rest, found = scan(line, TYPES)
        again = orjson.loads(rest)
        assert not set(again) & set(found) and {**again, **found}.keys() == obj.keys()
        for kind, fields in found.items():
            rows = [] if not fields else [list(r) for r in zip(*(
                [f[1][c] for c in f[0].tolist()] if t is str else f.tolist() for f, t in zip(fields, TYPES[kind])))]
            assert rows == obj[kind], kind


def test_a_corrupt_gzip_stream_is_named_as_before(tmp_path):
    src = FILES[0].read_bytes()
    z = gzip.compress(src * 40)
    bad = tmp_path / "corrupt.trace.jsonl.gz"
    bad.write_bytes(z[: len(z) // 2] + bytes(b ^ 0x5A for b in z[len(z) // 2: len(z) // 2 + 64]) + z[len(z) // 2 + 64:])
    with pytest.raises(zlib.error) as raw:
        zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(bad.read_bytes())
    with pytest.raises(TraceFormatError, match="a corrupt gzip stream") as e:
        load_trace(bad)
    assert str(e.value) == f"{bad}: a corrupt gzip stream ({raw.value})"


def test_words_are_read_at_any_byte():
    buf = np.frombuffer(b"0123456789" + bytes(row_scan.PAD), dtype=np.uint8)
    assert int(row_scan.words_of(buf)[2]) == int.from_bytes(b"23456789", "little")


@pytest.mark.parametrize("scan", _scan_functions(), ids=lambda f: f.__module__.rsplit(".", 1)[-1])
def test_a_string_first_seen_late_in_a_long_section_is_its_own(scan):
    rows = [["plan", i, -1, 10 * i, 10 * i + 5, "late thread" if i == 150 else "scheduler", -1, -1]
            for i in range(200)]
    line = json.dumps({"chunk": 1, "host_spans": rows}, separators=(",", ":")).encode()
    _, found = scan(line, TYPES)
    codes, table = found["host_spans"][5]
    assert [table[c] for c in codes.tolist()] == [r[5] for r in rows] and table == ["scheduler", "late thread"]


def test_the_compiled_scanner_is_installed():
    """An install on a machine with a C compiler builds it (pyproject.toml's ext-modules; optional,
    so a failed build is only a warning there): here that failure is an error."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}): large files are read with numpy only")
    assert row_scan_compiled.available(), "photon_trace/telemetry/trace/_row_scan.c was not built: pip install -e ."


def test_the_compiled_scanner_takes_many_distinct_strings_and_reads_an_older_files_rows():
    if not row_scan_compiled.available():
        pytest.skip("the compiled scanner is not installed")
    rows = [[f"op{i}", i, -1, 10 * i, 10 * i + 5, f"t{i % 3}", -1, -1] for i in range(5000)]
    line = json.dumps({"chunk": 1, "host_spans": rows}, separators=(",", ":")).encode()
    rest, found = row_scan_compiled.scan_chunk(line, TYPES)
    names, table = found["host_spans"][0]
    assert rest == b'{"chunk":1}' and [table[c] for c in names.tolist()] == [r[0] for r in rows]
    narrow = json.dumps({"chunk": 2, "host_spans": [r[:6] for r in rows[:3]]}, separators=(",", ":")).encode()
    assert row_scan_compiled.scan_chunk(narrow, TYPES) is None
    _, found = row_scan_compiled.scan_chunk(narrow, TYPES, {"host_spans": 6})
    assert [f.tolist() for f in found["host_spans"][6:]] == [[-1] * 3, [-1] * 3]


def test_a_real_line_with_any_one_byte_changed_reads_as_the_parser_reads_it(tmp_path, monkeypatch, scans):
    """Byte flips at random places of a real chunk line (seeded): what loads, or the error, is the
    parser's whichever scanner reads first."""
    lines, i = _chunk_line(FILES[0])
    line, rng = lines[i].encode(), random.Random(33)
    bad = tmp_path / "flipped.trace.jsonl"
    for n in range(120):
        at = rng.randrange(len(line))
        flipped = line[:at] + bytes([rng.choice(b'0159-+.eE ,:[]{}"\\tfnx\x01\x7f\xc3\xff')]) + line[at + 1:]
        bad.write_bytes(b"\n".join([*(s.encode() for s in lines[:i]), flipped, *(s.encode() for s in lines[i + 1:])])
                        + b"\n")
        parsed = _load(bad, monkeypatch, scan=False)
        scanned = _load(bad, monkeypatch, scan=True)
        if isinstance(parsed, str) or isinstance(scanned, str):
            assert scanned == parsed, (n, at, flipped[max(0, at - 20):at + 20])
        else:
            assert _records(scanned) == _records(parsed), (n, at, flipped[max(0, at - 20):at + 20])
