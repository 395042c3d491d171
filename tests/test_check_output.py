"""What ``photon-trace check`` tells its reader: the figures behind a pass as well as a fail, the
accidental syncs counted over the whole trace beside the steady-state window's count (where idle
and the dashboard count), and a JUnit report per trace, named after it and timed."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.trace_builder import pipelined_trace, sync_bug_trace
from photon_trace.cli.dispatch import main
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.gate import EXIT_FAIL, EXIT_PASS, run_check
from photon_trace.telemetry.trace.file import load_trace, write_trace

ROOT = Path(__file__).resolve().parents[1]
SYNC_BUG = ROOT / "traces" / "tiny-point-s8-mask-sync-pipelined.trace.jsonl"   # recorded, not built


def test_a_pass_prints_every_gates_figures_and_the_steady_state(tmp_path, capsys):
    path = write_trace(pipelined_trace(tokens=40), tmp_path / "clean.trace.jsonl")
    report = analyze(load_trace(path))
    assert main(["check", str(path)]) == EXIT_PASS
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("photon-trace check: PASS (2 gates)")
    idle = f"{report.idle_fraction:.2%}"
    assert out[1].startswith(f"  idle_fraction: pass: steady-state idle fraction {idle} of {report.stream} over "
                             f"{len(report.steps)} steps")
    assert out[2] == "  accidental_syncs: pass: no accidental syncs in the whole trace"
    assert out[3].startswith(f"  steady state: {len(report.steps)} steps") and f"idle {idle}" in out[3]
    assert f"median period {report.period_ms:.3f} ms" in out[3]


def test_a_fail_prints_the_gates_that_passed_too(tmp_path, capsys):
    """The verdict goes to stderr on a fail; the figures are the output, on stdout either way."""
    path = write_trace(sync_bug_trace(tokens=40), tmp_path / "bug.trace.jsonl")
    assert main(["check", str(path), "--max-idle", "1"]) == EXIT_FAIL
    out, err = capsys.readouterr()
    (verdict,) = err.splitlines()
    assert verdict.startswith("photon-trace check: FAIL:") and "accidental syncs in the whole trace" in verdict
    out = out.splitlines()
    assert len(out) == 2 and out[0].startswith("  idle_fraction: pass: ") and out[1].startswith("  steady state: ")


def test_the_sync_gate_counts_the_whole_trace_and_says_the_windows_count():
    trace = load_trace(SYNC_BUG)
    report = analyze(trace)
    w0, w1 = report.window
    accidental = [w for w in trace.waits if not w.expected]
    in_window = [w for w in accidental if w.t0 < w1 and w.t1 >= w0]
    assert 0 < len(in_window) < len(accidental)   # the two counts differ on this trace
    gate = run_check(trace).gates[1]
    assert gate.name == "accidental_syncs" and gate.value == len(accidental)
    assert gate.message.startswith(f"{len(accidental)} accidental syncs in the whole trace ({len(in_window)} in "
                                   f"the steady-state window of {len(report.steps)} steps, where idle is measured)")
    assert sum(s.count for s in report.syncs) == len(in_window)   # what the dashboard shows


def test_junit_reports_are_named_per_trace_and_timed(tmp_path):
    paths = [write_trace(pipelined_trace(tokens=40), tmp_path / "a-clean.trace.jsonl"),
             write_trace(sync_bug_trace(tokens=40), tmp_path / "b-bug.trace.jsonl")]
    suites, classnames = [], []
    for path in paths:
        xml = tmp_path / f"{path.name}.xml"
        result = run_check(path, out_junit=xml)
        root = ET.parse(xml).getroot()
        (suite,) = root.findall("testsuite")
        suites.append(suite.get("name"))
        assert path.name in suite.get("name")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", suite.get("timestamp"))
        total = float(suite.get("time"))
        assert total > 0 and float(root.get("time")) == total
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == [g.name for g in result.gates]
        times = [float(c.get("time")) for c in cases]
        assert all(t >= 0 for t in times) and sum(times) <= total
        classnames += [{c.get("classname") for c in cases}]
    assert suites[0] != suites[1]
    assert classnames == [{"photon_trace.check.a-clean"}, {"photon_trace.check.b-bug"}]


def test_bad_input_is_one_timed_error_case_named_after_the_file(tmp_path):
    xml = tmp_path / "bad.xml"
    run_check(tmp_path / "missing.trace.jsonl", out_junit=xml)
    suite = ET.parse(xml).getroot().find("testsuite")
    (case,) = suite.findall("testcase")
    assert case.get("classname") == "photon_trace.check.missing" and case.find("error") is not None
    assert float(case.get("time")) >= 0 and "missing.trace.jsonl" in suite.get("name")


@pytest.mark.parametrize("kw", [dict(max_idle_fraction=2.0), dict(max_idle_fraction=-0.1), dict(tolerance=-1.0)])
def test_run_check_refuses_limits_out_of_range(kw):
    with pytest.raises(ValueError):
        run_check(pipelined_trace(tokens=20), **kw)
