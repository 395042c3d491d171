"""The profiler-trace reader streams (issue 31): blocks of events cut at element boundaries by a
byte scanner, never the whole document as Python objects. What it reads is what the
whole-document parse reads, however the blocks fall (strings holding brackets, commas and
escaped quotes; keys after the events array), and its memory is bounded by its columns."""
from __future__ import annotations

import gzip
import json
import tracemalloc

import pytest

from photon_trace.telemetry.trace.importers import kineto_read, kineto_scan
from photon_trace.telemetry.trace.importers.kineto import import_kineto
from photon_trace.telemetry.trace.importers.kineto_scan import element_ends

from helpers.kineto_builder import KinetoBuilder, training_trace


def _records(trace):
    return (trace.header, list(trace.host_spans), list(trace.device_spans), trace.waits, trace.steps)


def _whole(monkeypatch, path, **kw):
    """The trace as the whole-document parse reads it (the stream refused at its first block)."""
    with monkeypatch.context() as m:
        def refuse(self):
            raise kineto_scan.Unstreamable("test: parse whole")
            yield
        m.setattr(kineto_scan.Stream, "blocks", refuse)
        return import_kineto(path, **kw)


def _awkward(tmp_path):
    """Names that a scanner unaware of strings or escapes would cut in the wrong place, and the
    metadata Kineto writes after the events."""
    b = training_trace(3, kernels_per_step=12)
    names = ['aten::index_put_ ], {"ph": "X"}, [', 'a \\"quoted\\" ] name', 'ends in a backslash \\',
             'unicode µs → ok', '{[,]}' * 5]
    for i, n in enumerate(names):
        b.op(n, 1_000_000 + 50 * i, 3)
    b.events[5]["args"] = {"nested": {"list": [1, {"x": "]"}], "s": "}"}, "correlation": b.events[5]["args"]
                           .get("correlation")}
    doc = b.doc()
    doc["traceName"] = "trace ] after"
    doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    doc["displayTimeUnit"] = "ms"
    p = tmp_path / "awkward.pt.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc, indent=1).encode()))
    return p


@pytest.mark.parametrize("block", [64, 1000, 1 << 22])
def test_small_blocks_read_what_the_whole_document_holds(tmp_path, monkeypatch, block):
    p = _awkward(tmp_path)
    whole = _whole(monkeypatch, p)
    monkeypatch.setattr(kineto_scan, "BLOCK", block)
    monkeypatch.setattr(kineto_scan, "_READ", 97)          # decompressed pieces cut anywhere
    monkeypatch.setattr(kineto_read, "WHOLE_MAX", -1)      # no fallback: the stream must read it
    streamed = import_kineto(p)
    assert streamed.header["clock"]["wall_ns"] == 1_700_000_000_000_000_000     # a key after the events
    assert streamed.header["source"]["display_time_unit"] == "ms"
    assert any("quoted" in h.phase for h in streamed.host_spans)
    assert _records(streamed) == _records(whole)


def test_the_scanner_ignores_brackets_and_commas_in_strings():
    buf = b'{"a": "x, ]"}, {"b": "\\\\"}, {"c": "\\", ]"} ] , "k": 1'
    comma, close = element_ends(buf)
    assert buf[close:close + 1] == b"]" and buf[:close].rstrip().endswith(b'"}')
    assert json.loads(b"[" + buf[:close] + b"]") == [{"a": "x, ]"}, {"b": "\\"}, {"c": '", ]'}]
    assert json.loads(b"[" + buf[:comma] + b"]") == [{"a": "x, ]"}, {"b": "\\"}]


def test_a_bare_array_and_a_plain_file_stream_too(tmp_path, monkeypatch):
    b = KinetoBuilder()
    b.op("aten::mm", 100, 10)
    b.launch("gemm", 7, 102, 4, 110, 30)
    p = tmp_path / "bare.json"
    p.write_text(json.dumps(b.doc()["traceEvents"]))
    whole = _whole(monkeypatch, p)
    monkeypatch.setattr(kineto_scan, "BLOCK", 50)
    monkeypatch.setattr(kineto_read, "WHOLE_MAX", -1)
    assert _records(import_kineto(p)) == _records(whole)


def test_a_large_file_cut_short_is_read_up_to_its_last_complete_event(tmp_path, monkeypatch):
    """Past WHOLE_MAX the stream gives the account of a cut file itself (no whole parse)."""
    b = training_trace(4, kernels_per_step=10)
    text = json.dumps(b.doc()).encode()
    p = tmp_path / "cut.json"
    p.write_bytes(text[: len(text) * 2 // 3])
    monkeypatch.setattr(kineto_read, "WHOLE_MAX", -1)
    monkeypatch.setattr(kineto_scan, "BLOCK", 300)
    with pytest.raises(kineto_read.KinetoFormatError, match=r"truncated: the JSON ends mid-way \(after \d+ complete"):
        import_kineto(p)
    with pytest.warns(kineto_read.TraceTruncatedWarning, match=r"imported the \d+ complete events"):
        partial = import_kineto(p, strict=False)
    assert partial.header["truncated"] is True and 0 < len(partial.device_spans) < 40


def test_memory_while_reading_is_bounded_by_the_columns_not_the_document(tmp_path, monkeypatch):
    """The whole document as dicts is ~1 KB an event; streamed, the reader's peak allocation is
    its columns (~50 B an event) plus one block (here 256 KB of JSON)."""
    p = training_trace(120, kernels_per_step=40).write(tmp_path / "t.json.gz")
    n = len(json.loads(gzip.decompress(p.read_bytes()))["traceEvents"])
    monkeypatch.setattr(kineto_scan, "BLOCK", 256 << 10)
    tracemalloc.start()
    try:
        doc = kineto_read.read_kineto(p)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert doc.n_events == n > 20_000
    assert peak < 200 * n + (8 << 20), f"peak {peak / n:.0f} B an event over {n} events"
