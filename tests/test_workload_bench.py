"""The standard workload, traced runs of it, ``photon-trace bench`` and ``check --run``
(tiny preset, host-process device, short)."""
from __future__ import annotations

import argparse
import json

import pytest

from photon_trace.cli.bench import add_bench_parser, render_tables
from photon_trace.cli.check import add_check_parser
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.traced_run import run_traced
from photon_trace.workload import Workload, drive, engine_settings, prepare

WL = Workload(streams=4, tokens=24, requests_per_stream=2, seed=7)


def _parse(add, argv):
    parser = argparse.ArgumentParser()
    add(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_drafts_are_deterministic_and_mix_the_stop_conditions():
    a, b = WL.draft(), Workload(streams=4, tokens=24, requests_per_stream=2, seed=7).draft()
    assert a == b and len(a) == 8
    assert a != Workload(streams=4, tokens=24, requests_per_stream=2, seed=8).draft()
    wide = Workload(streams=32, seed=1).draft()
    assert {r.stop for r in wide} == {"stop_token", "length"}
    lengths = [r.target for r in wide]
    assert 90 <= sum(lengths) / len(lengths) <= 130 and min(lengths) >= 82 and max(lengths) <= 138
    assert {r.params.greedy for r in wide} == {True, False}
    fmt = {r.response_format.kind for r in Workload(streams=16, constrained="point").draft() if r.response_format}
    assert fmt == {"point"}


@pytest.fixture
def engines(tiny_engines):
    """The session's tiny engines (conftest): their sizes (``TINY``) hold ``WL`` too."""
    assert all(e.config.max_context >= engine_settings(WL)["max_context"] for e in tiny_engines.values())
    return tiny_engines


def test_stop_tokens_end_requests_at_their_drawn_length_in_both_modes(engines):
    prepared = prepare(engines[2], WL)
    runs = {d: drive(e, prepared.requests) for d, e in engines.items()}
    assert runs[1].tokens == runs[2].tokens, "pipelined and blocking differ"
    for spec, tokens, reason in zip(prepared.requests, runs[2].tokens, runs[2].finish_reasons):
        if spec.stop == "stop_token":
            assert len(tokens) == spec.target or tokens.count(tokens[-1]) == 1
            assert reason == "stop" and tokens[-1] in spec.params.stop_token_ids
        else:
            assert reason == "length" and len(tokens) == spec.target
    # stop tokens the scheduler cannot foresee: zombies in pipelined mode only
    assert runs[1].zombie_rows == 0 < runs[2].zombie_rows


def test_run_traced_writes_a_trace_with_a_full_header(tmp_path):
    path = tmp_path / "run.trace.jsonl"
    trace, summary = run_traced(dict(model="tiny", backend="cpu", depth=2), Workload(streams=2, tokens=12), path)
    back = load_trace(path)
    assert back == trace and not back.header.get("incomplete")
    h = back.header
    assert (h["model"], h["backend"]) == ("tiny", "cpu") and h["device"]["name"]
    s = h["settings"]
    assert (s["depth"], s["mask_upload"], s["mode"], s["streams"]) == (2, "async", "pipelined", 2)
    assert s["workload"]["tokens"] == 12 and sum(s["planned_stops"].values()) == 2
    assert summary["generated"] == sum(st.tokens for st in trace.steps) > 0
    assert summary["analysis"]["L"] > 0 and summary["trace"] == str(path)


def test_bench_writes_traces_and_a_summary_and_prints_both_tables(tmp_path, capsys):
    args = _parse(add_bench_parser, ["bench", "--model", "tiny", "--backend", "cpu", "--streams", "1", "3",
                                     "--tokens", "16", "--out", str(tmp_path), "--no-progress"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "Per mode" in out and "Per row" in out and "predicted" in out and "Pipelining gain" in out
    summary = json.loads((tmp_path / "bench_summary.json").read_text())
    assert [r["streams"] for r in summary["rows"]] == [1, 3]
    for row in summary["rows"]:
        assert row["outputs_identical"]
        c = row["cost_model"]
        assert c["T_block_ms"] > 0 and c["T_pipe_ms"] > 0 and c["observed"] > 0 and c["L"] > 0
        assert c["pairs"] == 1 and c["pipelined_wins"] == int(c["observed"] > 1)
        assert c["observed_min"] == c["observed_max"] == c["observed"]
        g = row["gain"]
        assert g["gain_low"] <= g["gain"] <= g["gain_high"] and set(g["device"]) == {"forward", "sample"}
        assert all(run["host_run"]["wall_ns"] > 0 for mode in ("blocking", "pipelined") for run in row["runs"][mode])
        m = row["modes"]["blocking"]
        assert 0 <= m["host_idle_fraction"] <= m["idle_fraction"] < 1 and 0 < m["bookkeeping_share"] < 1
        settings = {}
        for mode in ("blocking", "pipelined"):
            (path,) = row["modes"][mode]["traces"]
            settings[mode] = load_trace(path).header["settings"]
            assert settings[mode]["mode"] == mode
        # one workload, engine seed included: the dashboard's cost model takes the pair only
        # when nothing but these differ (dashboard.panels.cost_model_pair.WORKLOAD_FREE)
        a, b = settings["blocking"], settings["pipelined"]
        assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} <= {"depth", "mode", "planned_stops"}
    assert len(list(tmp_path.glob("*.trace.jsonl"))) == 4
    assert render_tables(summary).splitlines()[0].startswith("photon-trace bench: model=tiny")


def test_check_run_makes_a_short_pipelined_trace_and_checks_it(tmp_path, capsys):
    md = tmp_path / "check.md"
    args = _parse(add_check_parser, ["check", "--run", "--streams", "2", "--tokens", "16", "--out",
                                     str(tmp_path), "--max-idle", "1.0", "--markdown", str(md)])
    assert args.func(args) == 0, capsys.readouterr()
    (trace,) = tmp_path.glob("check-tiny-s2-*.trace.jsonl")
    assert load_trace(trace).header["settings"]["mode"] == "pipelined"
    assert "PASS" in md.read_text()


def test_check_needs_a_trace_or_run(capsys):
    args = _parse(add_check_parser, ["check"])
    assert args.func(args) == 2
    assert "give a trace file or --run" in capsys.readouterr().err
