"""A small profiler trace is decoded whole (``importers/kineto_small.py``), not streamed: what it
reads must be what the stream reads, field for field, and what it cannot read the same way it
must leave to the stream."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from photon_trace.telemetry.trace.importers import kineto_read
from photon_trace.telemetry.trace.importers.kineto_read import KinetoFormatError, read_kineto
from photon_trace.telemetry.trace.importers.kineto_small import small_document

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted((ROOT / "tests" / "data" / "kineto").glob("*.json.gz")) + sorted(
    Path("/work/shared/kineto-samples").glob("*.json.gz"))


def streamed(monkeypatch, path: Path, **kw):
    with monkeypatch.context() as m:
        m.setattr(kineto_read, "small_document", lambda *a: None)
        return read_kineto(path, **kw)


def same(a, b) -> None:
    assert (a.meta, a.thread_names, a.resolution_ns, a.n_events, a.ignored, a.problems, a.truncated) == \
        (b.meta, b.thread_names, b.resolution_ns, b.n_events, b.ignored, b.problems, b.truncated)
    for k in a.events.arrays:
        assert a.events.arrays[k].dtype == b.events.arrays[k].dtype and np.array_equal(a.events.arrays[k],
                                                                                       b.events.arrays[k]), k
    assert (a.events.names, a.events.threads, a.events.lanes, a.events.args, a.events.odd_corr) == \
        (b.events.names, b.events.threads, b.events.lanes, b.events.args, b.events.odd_corr)
    for f, g in ((a.flows_start, b.flows_start), (a.flows_end, b.flows_end)):
        assert all(np.array_equal(x, y) for x, y in zip(f[:3], g[:3])) and f.odd == g.odd


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name.split(".")[0])
def test_a_small_sample_reads_as_the_stream_reads_it(path, monkeypatch):
    assert small_document(path, None, path.stat().st_size) is not None    # the small path is the one taken
    same(read_kineto(path), streamed(monkeypatch, path))


def doc(events: list, before: dict | None = None, after: dict | None = None) -> bytes:
    body = {**(before or {"schemaVersion": 1}), "traceEvents": events, **(after or {})}
    return json.dumps(body).encode()


EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10.5, "dur": 3.25},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12, "dur": 1,
           "args": {"stream": 7, "correlation": 5, "device": 0}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 11, "dur": 1,
           "args": {"correlation": 5}},
          {"ph": "s", "cat": "ac2g", "id": 5, "pid": 1, "tid": 2, "ts": 11},
          {"ph": "f", "cat": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 12},
          {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}]


@pytest.mark.parametrize("raw", [
    doc(EVENTS, after={"baseTimeNanoseconds": 5, "traceName": "x"}),
    doc(EVENTS, before={"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceName": "a"},
        after={"traceName": "b"}),
    doc(EVENTS + [{"ph": "X", "cat": "kernel", "name": "nan", "pid": 0, "tid": 7, "ts": 20, "dur": 1,
                   "args": {"stream": 7, "correlation": 2**70}}]),
    doc([]),
    doc(EVENTS, before={"schemaVersion": 9}),
    doc(EVENTS).replace(b'"dur": 1,', b'"dur": NaN,', 1),    # orjson refuses it: json.loads reads it
], ids=["keys-after", "keys-both-sides", "odd-correlation", "no-events", "newer-schema", "nan"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_made_documents_read_as_the_stream_reads_them(raw, gz, tmp_path, monkeypatch):
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    outcomes = []
    for read in (lambda: read_kineto(path), lambda: streamed(monkeypatch, path)):
        try:
            outcomes.append(read())
        except KinetoFormatError as e:
            outcomes.append(str(e))
    if isinstance(outcomes[0], str):
        assert outcomes[0] == outcomes[1]
    else:
        same(*outcomes)


@pytest.mark.parametrize("raw", [
    gzip.compress(doc(EVENTS))[:-30],                        # a gzip stream cut short
    gzip.compress(doc(EVENTS)) + gzip.compress(doc([])),     # two gzip members: the stream reads the first
    doc(EVENTS)[:-20],                                       # JSON cut short
    doc(EVENTS)[:-1] + b', "traceEvents": []}',              # the key twice
    b"\xef\xbb\xbf" + doc(EVENTS),                           # a byte-order mark
    json.dumps(EVENTS).encode(),                             # a bare array of events
], ids=["gzip-cut", "two-members", "json-cut", "key-twice", "bom", "bare-array"])
def test_what_the_stream_reads_otherwise_is_left_to_it(raw, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    assert small_document(path, None, len(raw)) is None


def test_a_document_over_four_blocks_is_streamed(tmp_path, monkeypatch):
    from photon_trace.telemetry.trace.importers import kineto_scan
    raw = doc(EVENTS * 50)
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(raw))
    assert small_document(path, None, path.stat().st_size) is not None
    monkeypatch.setattr(kineto_scan, "BLOCK", len(raw) // 4 - 1)     # the document is just over four blocks
    assert small_document(path, None, path.stat().st_size) is None
