"""``photon-trace demo`` and the dashboard command line: the story's runs, each bench's own
summary, the pair the dashboard opens on, and a refusal for what cannot be opened."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from photon_trace.cli.demo import SUMMARIES, demo_pair
from photon_trace.cli.dispatch import build_parser
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.file import load_trace


def test_the_demo_benches_the_pipelining_pair_and_the_mask_upload_bug_and_fix(tmp_path, capsys):
    args = build_parser().parse_args(["demo", "--streams", "1", "--mask-streams", "2", "--tokens", "12",
                                      "--repeats", "1", "--out", str(tmp_path), "--no-serve", "--no-progress"])
    assert args.model == "tiny"
    assert args.func(args) == 0
    captured = capsys.readouterr()
    err = captured.err
    assert err.index("1/3 blocking vs pipelined") < err.index("2/3 the mask-upload bug") < err.index("3/3 the fix")
    # the story in numbers: every speed with its interval, or why the machine was too busy to tell
    story = captured.out[captured.out.index("The story in numbers"):].splitlines()[1:]
    assert any(line.startswith("  pipelining, 1 stream(s): ") for line in story)
    assert any(line.startswith("  the mask-upload fix: accidental syncs per run ") for line in story)
    speeds = [line for line in story if "pipelining," in line or "fix's speed" in line]
    assert len(speeds) == 2 and all("95% interval" in line or "too busy to tell" in line for line in speeds), story
    names = {p.name for p in tmp_path.glob("*.trace.jsonl")}
    assert any(n.startswith("bench-tiny-async-s1-blocking") for n in names)
    assert any(n.startswith("bench-tiny-async-s1-pipelined") for n in names)
    sync, fixed = demo_pair(tmp_path, "tiny", 2)
    assert "sync-point" in sync.name and "async-point" in fixed.name
    buggy, good = analyze(load_trace(sync)), analyze(load_trace(fixed))
    assert sum(s.count for s in buggy.syncs) > 0 and sum(s.count for s in good.syncs) == 0
    # one summary per bench, each naming its own runs' traces (none overwrote another)
    assert not (tmp_path / "bench_summary.json").exists()
    summaries = [json.loads((tmp_path / name).read_text()) for name in SUMMARIES]
    assert [(s["settings"]["mask_upload"], s["settings"]["constrained"]) for s in summaries] == [
        ("async", None), ("sync", "point"), ("async", "point")]
    assert [s["tag"] for s in summaries] == ["bench-tiny-async", "bench-tiny-sync-point", "bench-tiny-async-point"]
    for s in summaries:
        traces = [t for row in s["rows"] for m in row["modes"].values() for t in m["traces"]]
        assert traces and all(Path(t).name.startswith(s["tag"] + "-s") for t in traces)


def test_the_dashboard_refuses_a_trace_it_cannot_read_and_opens_one_it_can(tmp_path, monkeypatch):
    """A missing trace used to be a warning, then served (its folder made openable): it is now
    refused before anything is served (more refusals: tests/test_cli_usage.py)."""
    import photon_trace.dashboard.app as app_module
    from photon_trace.cli.dashboard import run_dashboard

    class Stub:
        def run(self, **kw):
            return None
    seen = {}
    monkeypatch.setattr(app_module, "create_app", lambda files, allowed, live, guide=False, **kw: seen.update(
        files=files, guide=guide) or Stub())
    args = build_parser().parse_args(["dashboard", str(tmp_path / "nope.trace.jsonl"), "--guide"])
    with pytest.raises(ValueError, match="nope.trace.jsonl: no such file or folder"):
        run_dashboard(args)
    assert seen == {}
    real = Path(__file__).resolve().parents[1] / "traces" / "tiny-s8-pipelined.trace.jsonl"
    assert run_dashboard(build_parser().parse_args(["dashboard", str(real), "--guide", "--port", "0"])) == 0
    assert seen["guide"] is True and seen["files"] == [str(real)]
