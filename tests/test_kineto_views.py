"""Imported traces get views made for any program, one ranking everywhere, and ``import --json``
always answers with one JSON object.

On the real A100 traces in tests/data/kineto: the small sync program and the training step
whose NCCL waits (``stream_wait``) are the device's, not host code's.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from photon_trace.cli import main as cli
from photon_trace.dashboard.panels import figures
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.causes import DEVICE_SIDE, Cause
from photon_trace.telemetry.analysis.gate import render_markdown, run_check
from photon_trace.telemetry.trace.importers import load_any

DATA = Path(__file__).parent / "data" / "kineto"
SYNC = DATA / "critical_path_cuda_event_sync_event_sync_trace.json.gz"
TRAINING = DATA / "trace_filter_sampled_rank-0.json.gz"


@pytest.mark.parametrize("content,error", [
    (b"hello", "nor a PyTorch profiler trace"),
    (b'{"traceEvents": ]', "not JSON"),
    (b"\x1f\x8b\x08\x00garbage-after-a-gzip-magic", "corrupt gzip stream"),
], ids=["text", "bad_json", "corrupt_gzip"])
def test_import_json_always_prints_one_object(tmp_path, capsys, content, error):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    assert cli(["import", "--json", str(p)]) == 2
    out = capsys.readouterr().out
    doc = json.loads(out)                      # exactly one JSON document on stdout
    assert set(doc) == {"error", "exit"} and doc["exit"] == 2 and error in doc["error"]


def test_import_json_of_a_missing_file_a_wrong_stream_and_a_good_trace(tmp_path, capsys):
    assert cli(["import", "--json", str(tmp_path / "none.json")]) == 2
    assert "cannot read" in json.loads(capsys.readouterr().out)["error"]
    assert cli(["import", "--json", "--stream", "gpu9 stream 1", str(SYNC)]) == 2
    assert "no stream 'gpu9 stream 1'" in json.loads(capsys.readouterr().out)["error"]
    assert cli(["import", "--json", str(SYNC)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"]["runtime"]["name"] == "CUDA" and doc["analysis"]["top_ops"]


def test_import_json_answers_when_the_output_cannot_be_written(tmp_path, capsys):
    """After a good read, what fails later (here ``-o`` under a path that is a file) is still one
    JSON object on stdout, not a traceback."""
    (tmp_path / "a_file").write_text("")
    assert cli(["import", "--json", "-o", str(tmp_path / "a_file" / "x.trace.jsonl"), str(SYNC)]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"error", "exit"} and doc["error"].startswith("cannot write")


def test_an_imported_traces_cards_mean_something_for_any_program():
    r = analyze(load_any(SYNC))
    items = {i["key"]: i for i in figures.summary_items(r)}
    assert not {"tokens_per_s", "sample_ms", "bookkeeping_ms", "forward_ms", "L", "z"} & set(items)
    assert items["steps_per_s"]["value"] == f"{r.steps_per_s:,.0f}"
    assert items["busy_fraction"]["value"] == f"{100 * r.busy_fraction:.1f} %"
    assert items["top_op"]["value"].startswith("at::cuda::(anonymous namespace)::spin_k")   # the spin kernel
    assert items["top_cause"]["value"].startswith("host-bound launch")
    rows = {row["metric"] for row in figures.compare_rows(r, r)}
    assert "tokens/s" not in rows and "steps/s" in rows
    md = render_markdown(run_check(SYNC))
    assert "tokens/s" not in md and "bookkeeping" not in md
    assert "- steps per second:" in md and "- top ops by device time:" in md


def _cli_ranking(capsys, path: Path) -> list[tuple[str, str]]:
    assert cli(["import", str(path)]) == 0
    out = capsys.readouterr().out
    rows = []
    for part in out.split("\n\n"):
        if part.startswith(("diagnosis (what to fix first)", "device-side: what host code cannot fix")):
            rows += [(m.group(1), m.group(2).strip()) for m in
                     re.finditer(r"^  (\w+)\s+(.{60}) ", part, re.M)]
    return rows


@pytest.mark.parametrize("path", [SYNC, TRAINING], ids=["sync", "training"])
def test_the_cli_and_the_dashboard_rank_the_same_rows(capsys, path):
    r = analyze(load_any(path))
    dash = [(str(Cause(d.cause)), d.site_or_phase) for d in figures.ranked_diagnoses(r)]
    cli_rows = _cli_ranking(capsys, path)
    host = [x for x in cli_rows if Cause(x[0]).fixable_by_host]
    device = [x for x in cli_rows if not Cause(x[0]).fixable_by_host]
    # the console shows the first 8 of each group, the page all: the same order
    want_host = [x for x in dash if Cause(x[0]).fixable_by_host][:8]
    want_device = [x for x in dash if not Cause(x[0]).fixable_by_host][:8]
    assert [c for c, _ in host] == [c for c, _ in want_host] and [c for c, _ in device] == [c for c, _ in want_device]
    assert all(site.startswith(w[:55].rstrip("…")) or w.startswith(site[:55].rstrip("…"))
               for (_, site), (_, w) in zip(host + device, want_host + want_device))


def test_nccl_stream_waits_are_device_side_everywhere(capsys):
    r = analyze(load_any(TRAINING))
    waits = [d for d in r.diagnosis if d.cause == Cause.STREAM_WAIT]
    assert waits and all("nccl" in d.site_or_phase for d in waits[:2])
    rows = [row for row in figures.diagnosis_rows(r) if row["cause"] == Cause.STREAM_WAIT.label]
    assert rows and {row["who can fix it"] for row in rows} == {DEVICE_SIDE}
    md = render_markdown(run_check(TRAINING))
    device_part = md[md.index("## Device-side latency"):]
    assert "| wait on another stream |" in device_part
    assert "| wait on another stream |" not in md[:md.index("## Device-side latency")]
    assert cli(["import", str(TRAINING)]) == 0
    out = capsys.readouterr().out
    assert "stream_wait" in out[out.index("device-side: what host code cannot fix"):]
