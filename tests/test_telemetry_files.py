"""Trace files: round trip, written while running, and clear errors for bad files."""
from __future__ import annotations

import gzip
import json
import warnings

import pytest

from photon_trace.telemetry.export.perfetto import write_chrome_trace
from photon_trace.telemetry.recording.recorder import RecordingTracer
from helpers.loop_sim import SyntheticRun, synthetic_trace
from photon_trace.telemetry.recording.file_writer import TraceFileWriter
from photon_trace.telemetry.trace.file import TraceFormatError, TraceTruncatedWarning, load_trace, write_trace
from photon_trace.telemetry.trace.header import FORMAT_NAME, FORMAT_VERSION, new_header
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait
from photon_trace.telemetry.tracer import StepKind, TraceLevel


@pytest.fixture(scope="module")
def trace():
    return synthetic_trace(SyntheticRun(steps=30, mask_upload_bug=True))


@pytest.mark.parametrize("name", ["run.trace.jsonl", "run.trace.jsonl.gz"])
def test_write_then_load_gives_the_same_trace(tmp_path, trace, name):
    path = write_trace(trace, tmp_path / name, chunk_rows=50)
    if name.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = load_trace(path)
    assert back == trace
    assert back.header["format"] == FORMAT_NAME and back.header["version"] == FORMAT_VERSION
    for key in ("settings", "model", "backend", "device", "host", "clock", "photon_trace_version"):
        assert key in back.header
    assert set(back.header["clock"]) >= {"wall_ns", "mono_ns", "device_error_ns"}


def test_the_file_is_readable_while_the_run_is_going_and_complete_after_close(tmp_path):
    path = tmp_path / "traces" / "live.trace.jsonl"
    tr = RecordingTracer(TraceLevel.ON, sinks=[TraceFileWriter(path)], keep=True, flush_interval_s=None,
                         nvtx=False)
    for i in range(3):
        tr.step(i, kind=StepKind.DECODE, slot=i % 2, rows=2, zombie_rows=0, constrained_rows=0, tokens=2)
    tr.flush()
    tr.describe(model="late-model")
    tr.step(3, kind=StepKind.DECODE, slot=1, rows=2, zombie_rows=0, constrained_rows=0, tokens=2)
    tr.flush()
    during = load_trace(path)
    assert [s.step for s in during.steps] == [0, 1, 2, 3]
    assert during.header["incomplete"] is True and during.header["model"] == "late-model"
    tr.step(4, kind=StepKind.DECODE, slot=0, rows=2, zombie_rows=0, constrained_rows=0, tokens=2)
    tr.close()
    after = load_trace(path)
    assert "incomplete" not in after.header
    assert after == tr.snapshot()


def test_ring_drops_are_recorded_in_the_file(tmp_path):
    path = tmp_path / "d.trace.jsonl"
    tr = RecordingTracer(TraceLevel.ON, sinks=[TraceFileWriter(path)], capacity=16, flush_interval_s=None,
                         nvtx=False)
    for i in range(20):
        tr.step(i, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    tr.close()
    assert load_trace(path).header["dropped"] == {"steps": 4}


def cut(src, dst, keep_bytes: int):
    dst.write_bytes(src.read_bytes()[:keep_bytes])
    return dst


def test_a_partial_last_line_loads_the_rest_with_a_warning(tmp_path, trace):
    full = write_trace(trace, tmp_path / "full.trace.jsonl", chunk_rows=20)
    lines = full.read_bytes().split(b"\n")
    # a crash mid-way through the 4th line
    keep = sum(len(l) + 1 for l in lines[:3]) + len(lines[3]) // 2
    bad = cut(full, tmp_path / "cut.trace.jsonl", keep)
    with pytest.warns(TraceTruncatedWarning, match="line 4 is a partial line"):
        t = load_trace(bad)
    assert t.header["truncated"] is True and t.header["incomplete"] is True
    assert 0 < len(t.host_spans) < len(trace.host_spans)
    assert t.host_spans == trace.host_spans[:len(t.host_spans)]
    with pytest.raises(TraceFormatError, match="line 4: truncated"):
        load_trace(bad, strict=True)


def test_a_cut_gzip_file_loads_what_was_flushed(tmp_path, trace):
    full = write_trace(trace, tmp_path / "full.trace.jsonl.gz", chunk_rows=20)
    data = full.read_bytes()
    bad = cut(full, tmp_path / "cut.trace.jsonl.gz", int(len(data) * 0.6))
    with pytest.warns(TraceTruncatedWarning):
        t = load_trace(bad)
    assert t.header["incomplete"] is True
    assert 0 < len(t.host_spans) < len(trace.host_spans)


def test_a_crash_between_lines_is_just_incomplete(tmp_path, trace):
    full = write_trace(trace, tmp_path / "full.trace.jsonl", chunk_rows=20)
    lines = full.read_bytes().split(b"\n")
    bad = cut(full, tmp_path / "cut.trace.jsonl", sum(len(l) + 1 for l in lines[:3]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = load_trace(bad)
    assert t.header["incomplete"] is True and "truncated" not in t.header


def test_a_corrupt_line_in_the_middle_is_an_error_naming_the_line(tmp_path, trace):
    full = write_trace(trace, tmp_path / "full.trace.jsonl", chunk_rows=20)
    lines = full.read_bytes().split(b"\n")
    lines[2] = lines[2][:40] + b"#garbage#" + lines[2][40:]
    bad = tmp_path / "bad.trace.jsonl"
    bad.write_bytes(b"\n".join(lines))
    with pytest.raises(TraceFormatError, match=r"bad.trace.jsonl: line 3: not valid JSON"):
        load_trace(bad)


def test_a_row_of_the_wrong_shape_is_an_error_naming_the_fields(tmp_path):
    header = new_header()
    p = tmp_path / "shape.trace.jsonl"
    p.write_text(json.dumps(header) + "\n" + json.dumps({"chunk": 1, "host_spans": [["plan", 1, 0, 5, 6]]}) + "\n")
    with pytest.raises(TraceFormatError, match=r"line 2: host_spans row 0: expected 8 fields \[phase, step, slot"):
        load_trace(p)
    p.write_text(json.dumps(header) + "\n" + json.dumps({"chunk": 1, "steps": [[1, "decode", 0, "4", 0, 0, 1]]}) + "\n")
    with pytest.raises(TraceFormatError, match=r"steps row 0: field rows should be int, got '4'"):
        load_trace(p)
    p.write_text(json.dumps(header) + "\n" + json.dumps({"chunk": 1, "spans": []}) + "\n")
    with pytest.raises(TraceFormatError, match="unknown record kind 'spans'"):
        load_trace(p)


def test_older_files_load_with_their_counters_not_recorded(tmp_path):
    """Version 1 had no ``cpu_ns``/``runq_ns``: its six-field host spans and waits load as -1;
    versions 1-2 had no device ``runq_t0``/``runq_t1``: seven-field device spans load as -1."""
    p = tmp_path / "v1.trace.jsonl"
    chunk = {"chunk": 1, "host_spans": [["plan", 1, 0, 5, 6, "MainThread"]],
             "device_spans": [["compute", "forward", 1, 0, 6, 8, 5]],
             "waits": [["commit: copy-back", True, 7, 9, "engine/engine.py:1", 1]]}
    p.write_text(json.dumps({**new_header(), "version": 1}) + "\n" + json.dumps(chunk) + "\n")
    t = load_trace(p)
    assert t.host_spans == [HostSpan("plan", 1, 0, 5, 6, "MainThread", -1, -1)]
    assert t.device_spans == [DeviceSpan("compute", "forward", 1, 0, 6, 8, 5, -1, -1)]
    assert t.waits == [HostWait("commit: copy-back", True, 7, 9, "engine/engine.py:1", 1, -1, -1)]
    # written again, it is a file of this version with the same records
    back = load_trace(write_trace(t, tmp_path / "v3.trace.jsonl"))
    assert back.header["version"] == FORMAT_VERSION == 3 and back.host_spans == t.host_spans
    assert back.device_spans == t.device_spans


def test_a_newer_version_asks_for_an_upgrade(tmp_path):
    p = tmp_path / "v9.trace.jsonl"
    p.write_text(json.dumps({**new_header(), "version": FORMAT_VERSION + 1}) + "\n")
    with pytest.raises(TraceFormatError, match=f"format version {FORMAT_VERSION + 1} is newer"):
        load_trace(p)


@pytest.mark.parametrize("content, message", [
    (b"", "empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), "PNG image"),
    (b'{"name": "x", "values": [1, 2]}\n', "not a photon_trace header"),
    (b"\x00\x01\x02binary", "binary"),
])
def test_foreign_files_are_reported_as_not_a_trace(tmp_path, content, message):
    p = tmp_path / "foreign.bin"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError, match=f"not a photon_trace trace: .*{message}"):
        load_trace(p)


def test_a_chrome_trace_json_is_recognised_and_pointed_to_perfetto(tmp_path, trace):
    chrome = write_chrome_trace(trace, tmp_path / "t.json")
    with pytest.raises(TraceFormatError, match="Chrome/Perfetto trace-event JSON"):
        load_trace(chrome)
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(chrome.read_bytes()))
    with pytest.raises(TraceFormatError, match="Chrome/Perfetto"):
        load_trace(gz)


def test_a_missing_file_is_a_format_error_with_the_path(tmp_path):
    with pytest.raises(TraceFormatError, match="nope.trace.jsonl: cannot read"):
        load_trace(tmp_path / "nope.trace.jsonl")
