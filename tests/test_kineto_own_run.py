"""Our own engine seen by torch.profiler: ``bench --torch-profiler`` writes the profiler's trace of
the same run beside ours, and importing it finds the same steps (on the CPU backend the device
work runs in the worker process, so the profiler sees the host only)."""
from __future__ import annotations

import argparse
import json

from photon_trace.cli.bench import add_bench_parser
from photon_trace.telemetry.trace.importers.crosscheck import check_against_profiler
from photon_trace.telemetry.trace.importers.kineto import import_kineto
from photon_trace.telemetry.recording.profiler_ranges import STEP_ANNOTATION
from photon_trace.traced_run import trace_run
from photon_trace.workload import Workload, engine_settings, prepare


def test_the_profilers_trace_of_our_run_has_our_steps(tiny_engines, tmp_path):
    """A run on the session's pipelined tiny engine (conftest: its sizes hold this workload)."""
    wl = Workload(streams=2, tokens=12)
    engine = tiny_engines[2]
    assert engine.config.max_context >= engine_settings(wl)["max_context"]
    prepared = prepare(engine, wl)
    ours, _ = trace_run(engine, prepared, tmp_path / "run.trace.jsonl",
                        torch_profiler=tmp_path / "run.pt.trace.json.gz")
    theirs = import_kineto(tmp_path / "run.pt.trace.json.gz", step_annotation=STEP_ANNOTATION)
    launched = {h.step for h in ours.host_spans if h.phase == "launch"}
    assert launched and {s.step for s in theirs.steps if s.step >= 0} == launched
    # every phase of ours is a range in theirs, named <phase>#<step>
    names = {h.phase for h in theirs.host_spans}
    assert {f"{h.phase}#{h.step}" for h in ours.host_spans} <= names
    check = check_against_profiler(ours, theirs)
    assert check.same_steps and check.steps == check.profiler_steps == len(launched)
    assert theirs.device_spans == [] and check.device_steps == 0


def test_bench_torch_profiler_writes_and_checks_the_profilers_traces(tmp_path, capsys):
    p = argparse.ArgumentParser()
    add_bench_parser(p.add_subparsers())
    args = p.parse_args(["bench", "--model", "tiny", "--backend", "cpu", "--streams", "1", "--tokens", "8",
                         "--out", str(tmp_path), "--no-progress", "--torch-profiler"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "torch.profiler: 2 runs recorded" in out and "finds the same steps in 2 of 2" in out
    assert len(list(tmp_path.glob("*.pt.trace.json.gz"))) == 2
    row = json.loads((tmp_path / "bench_summary.json").read_text())["rows"][0]
    assert all(run["torch_profiler"]["same_steps"] for runs in row["runs"].values() for run in runs)
