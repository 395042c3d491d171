"""``photon-trace demo`` and the dashboard command line: the story's runs, the pair the
dashboard opens on, and warnings for what cannot be opened."""
from __future__ import annotations


from photon_trace.cli.demo import demo_pair
from photon_trace.cli.dispatch import build_parser
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.file import load_trace


def test_the_demo_benches_the_pipelining_pair_and_the_mask_upload_bug_and_fix(tmp_path, capsys):
    args = build_parser().parse_args(["demo", "--streams", "1", "--mask-streams", "2", "--tokens", "12",
                                      "--repeats", "1", "--out", str(tmp_path), "--no-serve", "--no-progress"])
    assert args.model == "tiny"
    assert args.func(args) == 0
    err = capsys.readouterr().err
    assert err.index("1/3 blocking vs pipelined") < err.index("2/3 the mask-upload bug") < err.index("3/3 the fix")
    names = {p.name for p in tmp_path.glob("*.trace.jsonl")}
    assert any(n.startswith("bench-tiny-async-s1-blocking") for n in names)
    assert any(n.startswith("bench-tiny-async-s1-pipelined") for n in names)
    sync, fixed = demo_pair(tmp_path, "tiny", 2)
    assert "sync-point" in sync.name and "async-point" in fixed.name
    buggy, good = analyze(load_trace(sync)), analyze(load_trace(fixed))
    assert sum(s.count for s in buggy.syncs) > 0 and sum(s.count for s in good.syncs) == 0


def test_the_dashboard_warns_about_a_trace_it_cannot_read(tmp_path, capsys, monkeypatch):
    import photon_trace.dashboard.app as app_module
    from photon_trace.cli.dashboard import run_dashboard

    class Stub:
        def run(self, **kw):
            return None
    seen = {}
    monkeypatch.setattr(app_module, "create_app", lambda files, allowed, live, guide=False, **kw: seen.update(
        files=files, guide=guide) or Stub())
    args = build_parser().parse_args(["dashboard", str(tmp_path / "nope.trace.jsonl"), "--guide"])
    assert run_dashboard(args) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "nope.trace.jsonl is not a readable file" in err
    assert seen["guide"] is True
