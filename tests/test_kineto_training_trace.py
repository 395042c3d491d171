"""The larger real GPU trace (a sampled training step, rank 0 of 128: 4,855 events, five streams,
two ProfilerSteps), imported and analysed, and checked against the raw JSON and against HTA."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.file import load_trace, write_trace
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.lanes import streams
from helpers.hta_compare import hta_idle, hta_window, ours, stream_number

DATA = Path(__file__).parent / "data" / "kineto"
TRAINING = DATA / "trace_filter_sampled_rank-0.json.gz"
SYNC = DATA / "critical_path_cuda_event_sync_event_sync_trace.json.gz"
RAW = json.loads(gzip.decompress(TRAINING.read_bytes()))["traceEvents"]
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


@pytest.fixture(scope="module")
def trace():
    return load_any(TRAINING)


def test_every_device_op_lands_on_its_stream_linked_to_its_launch(trace):
    raw = [e for e in RAW if e.get("cat") in DEVICE_CATS]
    assert len(trace.device_spans) == len(raw) == 1204
    assert Counter(d.stream for d in trace.device_spans) == Counter(
        f"gpu0 stream {e['args']['stream']}" for e in raw)
    launches = {e["args"]["correlation"]: e["ts"] * 1000 for e in RAW if e.get("cat") == "cuda_runtime"}
    assert sorted(d.enqueued for d in trace.device_spans) == sorted(launches[e["args"]["correlation"]] for e in raw)
    assert trace.header["source"]["unlinked"] == 0
    assert trace.header["primary_stream"] == "gpu0 stream 7"   # 1,052 of the 1,204 ops
    assert streams(trace)[0] == "gpu0 stream 7" and len(streams(trace)) == 5


def test_host_lanes_steps_and_pageable_copies(trace):
    assert {h.thread for h in trace.host_spans} == {"thread 4037 (python3.8)", "thread 23695 (python3.8)"}
    host = sum(e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime") for e in RAW)
    assert len(trace.host_spans) == host == 3606
    assert [s.step for s in trace.steps] == [551, 552]   # every event is inside one of the two
    # Every memcpy to or from pageable memory blocks the host: each is a wait at its call site.
    pageable = [e for e in RAW if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]]
    assert len(trace.waits) == len(pageable) == 24
    assert all(not w.expected and "pageable host memory" in w.reason for w in trace.waits)
    assert Counter(w.site for w in trace.waits) == {
        "aten::to > aten::copy_": 17, "forward > aten::copy_": 4, "forward > aten::_local_scalar_dense": 3}


def test_the_analysis_covers_every_stream_and_says_what_other_streams_covered(trace):
    r = analyze(trace)
    assert r.stream == "gpu0 stream 7" and [s.stream for s in r.streams][0] == r.stream
    assert {s.stream for s in r.streams} == set(streams(trace))
    for s in r.streams:
        assert s.busy_ns + s.idle_ns == s.span_ns and sum(s.causes.values()) == s.idle_ns, s
        assert 0 <= s.covered_ns <= s.idle_ns and 0 <= s.host_idle_ns <= s.idle_ns
    assert [x.step for x in r.steps] == [551, 552]
    assert sum(b.covered_ns for b in r.bubbles) > 0
    assert all(b.covered_by for b in r.bubbles if b.covered_ns)
    # each other stream analysed on its own gets its bubbles and causes too
    nccl = analyze(trace, stream="gpu0 stream 84")
    assert nccl.stream == "gpu0 stream 84" and nccl.bubbles and nccl.busy_ns > 0


def test_written_as_our_format_and_read_back_unchanged(tmp_path, trace):
    path = write_trace(trace, tmp_path / "training.trace.jsonl.gz")
    back = load_trace(path)
    assert (back.host_spans, back.device_spans, back.waits, back.steps) == \
        (trace.host_spans, trace.device_spans, trace.waits, trace.steps)
    assert analyze(back).idle_ns == analyze(trace).idle_ns


@pytest.mark.parametrize("path", [SYNC, TRAINING], ids=["sync", "training"])
def test_idle_per_stream_agrees_with_hta(path):
    """HTA (which we did not write) and ours, over HTA's window: total idle per stream within 1%
    of the stream's span, and the idle HTA calls host_wait equal to ours in gaps the host opened."""
    pytest.importorskip("hta")
    theirs = hta_idle(path)
    mine = ours(hta_window(load_any(path)))
    assert {stream_number(s) for s in mine} == set(theirs)
    for name, (s, late) in mine.items():
        h = theirs[stream_number(name)]
        assert abs(sum(h.values()) * 1000 - s.idle_ns) <= 0.01 * s.span_ns, (name, h, s)
        assert abs(h["host_wait"] * 1000 - late) <= 0.01 * s.span_ns, (name, h, late)
