"""Bad profiler traces: a clear message naming the problem (and the event index), exit 2 from the
CLI, the dashboard keeps running; with --allow-partial, what is valid is analysed, with a warning.

The damaged traces are the small real sync trace with one thing broken (its event indices are
those of ``test_kineto_sync_trace``: 11 the fill kernel, 15 the reduce kernel, 19 the compare kernel).
"""
from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pytest

from photon_trace.cli import main as cli
from photon_trace.dashboard.sources.store import LoadError, TraceStore
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, run_check
from photon_trace.telemetry.trace.file import TraceFormatError, TraceTruncatedWarning
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.importers.kineto_read import KinetoFormatError, KinetoPartialWarning

SYNC = Path(__file__).parent / "data" / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz"


def fixture_doc() -> dict:
    return json.loads(gzip.decompress(SYNC.read_bytes()))


def _missing_dur(doc):
    del doc["traceEvents"][15]["dur"]


def _negative(doc):
    doc["traceEvents"][11]["dur"] = -3


def _before_launch(doc):
    doc["traceEvents"][19]["ts"] = 1707417525512200     # its cudaLaunchKernel (21) starts at ...512221


def _bad_ts(doc):
    doc["traceEvents"][11]["ts"] = "soon"


def _not_object(doc):
    doc["traceEvents"][4] = ["aten::sum"]


def _newer(doc):
    doc["schemaVersion"] = 2


def _no_stream(doc):
    doc["traceEvents"][15]["args"]["stream"] = "seven"


# (name, how to damage the fixture, what the message must say)
DAMAGED = [
    ("missing_field", _missing_dur, r"event 15 \(kernel 'void at::native::reduce_kernel.*missing 'dur'"),
    ("negative_duration", _negative, r"event 11 \(kernel .*negative duration -3 µs"),
    # (ops overlapping on one stream are no longer bad input: tests/test_kineto_order.py)
    ("before_its_launch", _before_launch, r"event 19 \(kernel .*starts 21\.000 µs before its own launch "
                                          r"\(event 21, cudaLaunchKernel\)"),
    ("bad_timestamp", _bad_ts, r"event 11 \(kernel .*'ts' is 'soon', not a finite number"),
    ("not_an_object", _not_object, r"event 4 is a list, not an object"),
    ("no_stream", _no_stream, r"event 15 .*a device op without an integer stream"),
    ("newer_schema", _newer, r"Kineto schema version 2 is newer than this importer reads \(1\)"),
]
PARTIAL = {"missing_field", "negative_duration", "before_its_launch", "bad_timestamp", "not_an_object", "no_stream"}


def write(tmp_path: Path, name: str, damage) -> Path:
    doc = fixture_doc()
    damage(doc)
    p = tmp_path / f"{name}.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return p


@pytest.mark.parametrize("name,damage,message", DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_trace_is_named_and_exits_2(tmp_path, capsys, name, damage, message):
    p = write(tmp_path, name, damage)
    with pytest.raises(KinetoFormatError, match=message):
        load_any(p)
    assert cli(["import", str(p)]) == 2
    err = capsys.readouterr().err
    assert "BAD INPUT" in err and str(p) in err and "Traceback" not in err
    result = run_check(p)
    assert result.exit_code == EXIT_BAD_INPUT and str(p) in result.error


@pytest.mark.parametrize("name,damage,message", [d for d in DAMAGED if d[0] in PARTIAL],
                         ids=[d[0] for d in DAMAGED if d[0] in PARTIAL])
def test_allow_partial_analyses_what_is_valid_with_a_warning(tmp_path, capsys, name, damage, message):
    p = write(tmp_path, name, damage)
    with pytest.warns(KinetoPartialWarning, match=message):
        trace = load_any(p, strict=False)
    # a bad device event is left out, an op that started before its launch too
    dropped_a_kernel = name in ("missing_field", "negative_duration", "bad_timestamp", "no_stream", "before_its_launch")
    assert len(trace.device_spans) == (4 if dropped_a_kernel else 5)
    assert analyze(trace).busy_ns > 0
    assert cli(["import", "--allow-partial", str(p)]) == 0
    assert "warning:" in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checked = run_check(p, allow_partial=True, max_idle_fraction=1.0)
    assert checked.exit_code != EXIT_BAD_INPUT and any("profiler trace:" in n for n in checked.notes)


def test_a_truncated_gzip_is_named_and_its_complete_events_can_be_read(tmp_path, capsys):
    whole = gzip.compress(gzip.decompress(SYNC.read_bytes()))
    p = tmp_path / "cut.json.gz"
    p.write_bytes(whole[: len(whole) * 2 // 3])
    with pytest.raises(KinetoFormatError, match=r"truncated: the gzip stream is cut short \(after \d+ complete events"):
        load_any(p)
    assert cli(["import", str(p)]) == 2 and "--allow-partial" in capsys.readouterr().err
    with pytest.warns(TraceTruncatedWarning, match="imported the \\d+ complete events before the cut"):
        partial = load_any(p, strict=False)
    assert partial.header["truncated"] is True and 0 < len(partial.host_spans) < 23
    assert cli(["import", "--allow-partial", str(p)]) == 0


def test_a_plain_json_cut_mid_way_is_truncated_too(tmp_path):
    text = gzip.decompress(SYNC.read_bytes()).decode()
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 2])
    with pytest.raises(KinetoFormatError, match="truncated: the JSON ends mid-way"):
        load_any(p)


@pytest.mark.parametrize("content,message", [
    (b"hello, world\n", "nor a PyTorch profiler trace"),
    (b"", "it is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "PNG image"),
    (b'{"traceEvents": {"not": "a list"}}', r"JSON, but not a trace: no 'traceEvents' list"),
    (b'{"schemaVersion": 1, "metrics": [1, 2]}', r"JSON, but not a trace: no 'traceEvents' list \(found \['metrics', "),
    (b'{"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 1}]}', "not one from the PyTorch profiler"),
    (b'{"traceEvents": [], "otherData": {"format": "photon_trace"}}', "photon_trace's own Perfetto export"),
    (b'{"traceEvents": [1, 2', "truncated"),
    (b'{"traceEvents": ]', r"not JSON \(Expecting value"),
    (b"\x1f\x8b\x08\x00garbage-after-a-gzip-magic", "corrupt gzip stream"),
], ids=["text", "empty", "png", "events_not_a_list", "other_json", "not_kineto", "our_export", "cut_array",
        "bad_json", "corrupt_gzip"])
def test_files_that_are_not_profiler_traces(tmp_path, capsys, content, message):
    p = tmp_path / "input.json"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError, match=message):
        load_any(p)
    assert cli(["import", str(p)]) == 2 and "Traceback" not in capsys.readouterr().err
    assert cli(["check", str(p)]) == 2


def test_the_dashboard_reports_a_bad_trace_and_shows_a_partial_one(tmp_path):
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text('{"schemaVersion": 99, "traceEvents": []}')
    partial = write(tmp_path, "partial", _missing_dur)
    store = TraceStore([tmp_path])
    with pytest.raises(LoadError, match="schema version 99 is newer"):
        store.get(bad)
    shown = store.get(partial)
    assert len(shown.trace.device_spans) == 4
    assert any("skipped 1 event (missing fields); first: event 15" in n for n in shown.notes)
    assert bad in store.listing() or bad.resolve() in store.listing()


def test_each_file_goes_to_its_reader(tmp_path):
    """Ours (header keys in any order), a one-line compact profiler trace, and our own Perfetto export."""
    from photon_trace.telemetry.export.perfetto import write_chrome_trace
    from photon_trace.telemetry.trace.file import write_trace
    from photon_trace.telemetry.trace.records import Trace

    kineto = load_any(SYNC)
    ours = write_trace(Trace({"version": 1, "backend": "sim", "format": "photon_trace"}, kineto.host_spans,
                             kineto.device_spans), tmp_path / "ours.trace.jsonl")
    assert load_any(ours).device_spans == kineto.device_spans
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(fixture_doc(), separators=(",", ":")))
    assert load_any(compact).waits == kineto.waits
    export = write_chrome_trace(kineto, tmp_path / "export.json")
    with pytest.raises(KinetoFormatError, match="own Perfetto export"):
        load_any(export)


def test_check_allow_partial_says_each_warning_in_one_line(tmp_path):
    """Not Python's warning format (the install path, the line number, the source line that
    warned): a CI log gets one line per thing said (issue 32, item 8)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    # (ops overlapping on one stream are no longer damage (issue 30): an op before its launch is)
    p = write(tmp_path, "two_problems", lambda doc: (_negative(doc), _before_launch(doc)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
           "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, "-m", "photon_trace.cli", "check", str(p), "--allow-partial",
                           "--max-idle", "1"], capture_output=True, text=True, env=env, cwd=root, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    lines = proc.stderr.splitlines()
    assert not any("Warning:" in line or "warnings.warn" in line or ".py:" in line.split("(")[0] for line in lines), \
        proc.stderr
    assert str(root / "photon_trace") not in proc.stderr
    notes = [line for line in lines if line.startswith("  note: ")]
    assert any("negative duration" in n for n in notes) and any("before its own launch" in n for n in notes), \
        proc.stderr
    assert all(line.startswith(("photon-trace check: ", "  note: ", "  warning: ")) for line in lines), proc.stderr


def test_a_thread_name_with_a_list_pid_names_no_thread_and_the_rest_imports(tmp_path):
    """A metadata event whose pid is a list (unhashable) stopped the import with
    ``TypeError: unhashable type: 'list'``; no span can be on such a thread, so it is passed over."""
    def odd_thread_name(doc):
        doc["traceEvents"].append({"ph": "M", "name": "thread_name", "pid": [1], "tid": 2, "args": {"name": "x"}})

    clean = load_any(write(tmp_path, "clean", lambda doc: None))
    odd = load_any(write(tmp_path, "odd_thread_name", odd_thread_name))
    assert odd.host_spans == clean.host_spans and odd.device_spans == clean.device_spans
