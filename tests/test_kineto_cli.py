"""``photon-trace import`` and ``photon-trace export perfetto`` on profiler traces, from the command line."""
from __future__ import annotations

import json
from pathlib import Path

from photon_trace.cli import main as cli
from photon_trace.telemetry.export.perfetto import BUBBLES_TRACK
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.telemetry.trace.importers import load_any

DATA = Path(__file__).parent / "data" / "kineto"
TRAINING = DATA / "trace_filter_sampled_rank-0.json.gz"


def test_import_prints_every_stream_and_writes_our_format(tmp_path, capsys):
    out = tmp_path / "training.trace.jsonl"
    assert cli(["import", str(TRAINING), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    for s in (7, 23, 25, 84, 203):
        assert f"gpu0 stream {s} " in text
    assert "syncs by call site" in text and "diagnosis (what to fix first)" in text
    assert load_trace(out).device_spans == load_any(TRAINING).device_spans
    # our own file is not imported again, and says why
    assert cli(["import", str(out)]) == 2
    assert "already a photon_trace trace" in capsys.readouterr().err


def test_import_json_and_another_stream(capsys):
    assert cli(["import", str(TRAINING), "--json", "--stream", "gpu0 stream 84"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["analysis"]["stream"] == "gpu0 stream 84" and doc["source"]["events"] == 4855
    assert len(doc["analysis"]["streams"]) == 5
    assert cli(["import", str(TRAINING), "--stream", "gpu9 stream 1"]) == 2
    assert "no stream 'gpu9 stream 1'" in capsys.readouterr().err


def test_the_perfetto_export_has_a_track_per_stream_and_thread(tmp_path):
    out = tmp_path / "training.perfetto.json"
    assert cli(["export", "perfetto", str(TRAINING), str(out)]) == 0
    doc = json.loads(out.read_text())
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert sorted(names) == sorted(["thread 4037 (python3.8)", "thread 23695 (python3.8)", BUBBLES_TRACK]
                                   + [f"gpu0 stream {s}" for s in (7, 23, 25, 84, 203)])
    waits = [e for e in doc["traceEvents"] if e.get("cat") == "host_wait"]
    assert len(waits) == 24
