"""The CI gate on hand-built traces: verdicts, exit codes, Markdown and JUnit output."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from photon_trace.telemetry.analysis import analyze
from helpers.trace_builder import (
    MASK_SYNC_SITE, MS, US, TraceBuilder, blocking_trace, host_delay_trace, item_sync_trace, pipelined_trace,
    sync_bug_trace)
from photon_trace.cli.check import main
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, run_check
from photon_trace.telemetry.trace.file import write_trace
from photon_trace.telemetry.trace.records import DeviceSpan


ROOT = Path(__file__).resolve().parents[1]


def failed(result) -> set[str]:
    return {g.name for g in result.failures}


def test_a_clean_pipelined_run_passes():
    r = run_check(pipelined_trace(streams=4, tokens=40, constrained=True))
    assert r.exit_code == EXIT_PASS and r.passed and [g.name for g in r.gates] == ["idle_fraction", "accidental_syncs"]


@pytest.mark.parametrize("trace, gates", [
    (sync_bug_trace(tokens=40), {"idle_fraction", "accidental_syncs"}),
    (item_sync_trace(tokens=40), {"idle_fraction", "accidental_syncs"}),
    (host_delay_trace(tokens=40), {"idle_fraction"}),
    (blocking_trace(tokens=40), {"idle_fraction"}),
], ids=["mask-upload-sync", "item-in-commit", "delay-in-plan", "blocking"])
def test_faulty_runs_fail_the_right_gates(trace, gates):
    r = run_check(trace)
    assert r.exit_code == EXIT_FAIL and failed(r) == gates


def test_a_sync_outside_the_steady_state_still_fails():
    tr = pipelined_trace(tokens=40)
    tr.waits.append(tr.waits[0]._replace(expected=False, reason="warm-up read", site="w.py:3"))
    r = run_check(tr)
    assert failed(r) == {"accidental_syncs"} and "w.py:3 (warm-up read) x1" in r.gates[1].message


def test_idle_limit_is_a_parameter():
    tr = sync_bug_trace(tokens=40)
    frac = analyze(tr).idle_fraction
    assert "idle_fraction" not in failed(run_check(tr, max_idle_fraction=frac + 0.01))
    assert "idle_fraction" in failed(run_check(tr, max_idle_fraction=frac - 0.01))


def test_baseline_regressions_in_idle_and_period_fail_beyond_the_tolerance():
    base = pipelined_trace(tokens=40)
    blocking = blocking_trace(tokens=40)
    slower = blocking_trace(tokens=40, plan_ns=250 * US + 400 * US)      # the host +400 µs a step: +14% period
    r = run_check(slower, blocking, max_idle_fraction=1.0)
    assert failed(r) == {"period_regression", "idle_regression"}
    assert run_check(slower, blocking, max_idle_fraction=1.0, tolerance=0.2).passed
    # a slower forward is the device's own speed: the machine changed, no verdict (comparison.py)
    r = run_check(pipelined_trace(tokens=40, forward_ns=2 * MS + 300 * US), base, max_idle_fraction=1.0)
    assert r.passed and r.undecided.startswith("the machine changed: forward 2.00 ms -> 2.30 ms")
    idler = host_delay_trace(tokens=40, delay_ns=2 * MS + 100 * US)      # plan outgrows the forward
    r = run_check(idler, analyze(base), max_idle_fraction=1.0)          # a baseline may be a Report
    assert {"idle_regression", "period_regression"} <= failed(r)
    assert run_check(base, base).passed


def test_markdown_and_junit_summaries(tmp_path):
    md, xml = tmp_path / "check.md", tmp_path / "check.xml"
    r = run_check(sync_bug_trace(tokens=40), out_md=md, out_junit=xml)
    text = md.read_text()
    assert text.startswith("# photon-trace check: FAIL")
    assert "| accidental_syncs | **FAIL** |" in text and MASK_SYNC_SITE in text
    suite = ET.parse(xml).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "2", "0")
    assert {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None} == failed(r)


def test_trace_files_are_loaded_and_checked(tmp_path):
    path = write_trace(pipelined_trace(tokens=40), tmp_path / "clean.trace.jsonl")
    bad = write_trace(item_sync_trace(tokens=40), tmp_path / "item.trace.jsonl")
    assert run_check(path).exit_code == EXIT_PASS
    assert run_check(bad, baseline=path).exit_code == EXIT_FAIL
    assert main([str(path)]) == EXIT_PASS
    assert main([str(bad), "--baseline", str(path), "--markdown", str(tmp_path / "s.md")]) == EXIT_FAIL
    assert (tmp_path / "s.md").exists()


def test_unreadable_or_foreign_files_are_bad_input(tmp_path):
    foreign = tmp_path / "perfetto.json"
    foreign.write_text('{"traceEvents": []}\n')
    xml = tmp_path / "bad.xml"
    for path in (tmp_path / "missing.jsonl", foreign):
        r = run_check(path, out_junit=xml, out_md=tmp_path / "bad.md")
        assert r.exit_code == EXIT_BAD_INPUT and r.error and r.gates == []
        assert ET.parse(xml).getroot().find("testsuite").get("errors") == "1"
        assert "BAD INPUT" in (tmp_path / "bad.md").read_text()
    good = write_trace(pipelined_trace(tokens=40), tmp_path / "ok.trace.jsonl")
    assert run_check(good, baseline=foreign).exit_code == EXIT_BAD_INPUT
    assert main([str(foreign)]) == EXIT_BAD_INPUT


def test_corrupt_or_empty_traces_are_bad_input():
    backwards = pipelined_trace(tokens=20)
    d = backwards.device_spans[5]
    backwards.device_spans[5] = DeviceSpan(d.stream, d.op, d.step, d.slot, d.t1, d.t0, d.enqueued)
    no_steps = pipelined_trace(tokens=20)
    no_steps.steps.clear()
    for tr in (backwards, TraceBuilder().build(), no_steps):
        r = run_check(tr)
        assert r.exit_code == EXIT_BAD_INPUT, r.summary()


# -- a damaged trace file is bad input (exit 2), never a failed gate ---------------------------

def damaged(tmp_path, how: str):
    """A clean trace file, damaged: how = dropped-not-a-dict | nested | no-end | cut-in-end."""
    good = write_trace(pipelined_trace(tokens=40), tmp_path / "good.trace.jsonl")
    lines = good.read_bytes().split(b"\n")[:-1]          # header, chunks..., end
    if how == "dropped-not-a-dict":
        header = json.loads(lines[0])
        header["dropped"] = ["host_spans", 3]
        lines[0] = json.dumps(header).encode()
    elif how == "nested":
        lines.insert(1, b'{"chunk": 0, "host_spans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    elif how == "no-end":
        lines.pop()
    path = tmp_path / f"{how}.trace.jsonl"
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(data[:-8] if how == "cut-in-end" else data)   # cut inside the end line
    return path


@pytest.mark.parametrize("how, says", [
    ("dropped-not-a-dict", "'dropped' must be an object"), ("nested", "nested too deeply"),
    ("no-end", "no end line"), ("cut-in-end", "cut inside a line")])
def test_a_damaged_trace_exits_2_with_a_message(tmp_path, how, says):
    path = damaged(tmp_path, how)
    result = run_check(path)
    assert result.exit_code == EXIT_BAD_INPUT and says in result.error, result.summary()
    assert main([str(path)]) == EXIT_BAD_INPUT
    assert run_check(good_trace := write_trace(pipelined_trace(tokens=40), tmp_path / "g.trace.jsonl"),
                     baseline=path).exit_code == EXIT_BAD_INPUT
    assert run_check(good_trace).exit_code == EXIT_PASS


@pytest.mark.parametrize("how", ["no-end", "cut-in-end"])
def test_allow_partial_checks_what_is_there_of_a_truncated_trace_and_says_so(tmp_path, how):
    path = damaged(tmp_path, how)
    result = run_check(path, allow_partial=True)
    assert result.exit_code == EXIT_PASS, result.summary()
    assert any("truncated" in n for n in result.notes)
    assert main([str(path), "--allow-truncated"]) == EXIT_PASS


def test_the_command_reports_a_damaged_trace_without_a_traceback(tmp_path):
    path = damaged(tmp_path, "nested")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "photon_trace.cli", "check", str(path)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == EXIT_BAD_INPUT
    assert "BAD INPUT" in proc.stderr + proc.stdout and "Traceback" not in proc.stderr


def test_markdown_ranks_what_host_code_can_fix_apart_from_device_side_latency():
    from photon_trace.telemetry.analysis import Diagnosis
    from photon_trace.telemetry.analysis.gate import _diagnosis_markdown
    rows = [Diagnosis("dispatch", "queued op started late", 9 * MS, 0.6, 1.06),   # most idle, not host code's
            Diagnosis("accidental_sync", MASK_SYNC_SITE, 5 * MS, 0.4, 1.04)]
    text = "\n".join(_diagnosis_markdown(rows))
    host, device = text.index("what host code can fix"), text.index("Device-side latency")
    assert host < text.index(MASK_SYNC_SITE) < device < text.index("queued op started late")
    assert "| accidental sync |" in text and "| device dispatch |" in text   # the dashboard's words
    md = render_markdown_of(sync_bug_trace(tokens=40, dispatch_ns=200 * US))
    assert md.index("what host code can fix") < md.index("Device-side latency")


def render_markdown_of(trace) -> str:
    from photon_trace.telemetry.analysis.gate import render_markdown
    return render_markdown(run_check(trace))


# -- a trace's strings cannot forge the CI summary (issue 32, item 2) --------------------------

FORGED_SITE = ('engine/x.py:1 |\n\n# photon-trace check: PASS\n\n| gate | pass | ok |\n'
               '<a href="https://evil.example/">details</a> <img src=x onerror=alert(1)> '
               '![logo](https://evil.example/i.png) [click](https://evil.example/) **ok** `x` <https://evil.example/>')


def test_trace_strings_cannot_forge_the_markdown_summary(tmp_path):
    """A failing run whose call site holds a row break, a heading claiming PASS, raw HTML, a
    link and an image: rendered as GitHub renders Markdown (CommonMark and its tables, by
    markdown-it-py, which we did not write), the page says FAIL once, has no heading but ours,
    no link, image or HTML element from the trace, and shows the site as its text."""
    from html.parser import HTMLParser

    from markdown_it import MarkdownIt

    tr = item_sync_trace(tokens=40)
    tr.waits = [w._replace(site=FORGED_SITE) if not w.expected else w for w in tr.waits]
    md = tmp_path / "summary.md"
    assert run_check(tr, out_md=md).exit_code == EXIT_FAIL

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.headings, self.text, self._in = [], [], [], None

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            self._in = tag if tag in ("h1", "h2") else self._in

        def handle_endtag(self, tag):
            self._in = None if tag == self._in else self._in

        def handle_data(self, data):
            self.text.append(data)
            if self._in:
                self.headings.append((self._in, data))

    page = Tags()
    page.feed(MarkdownIt("commonmark").enable("table").render(md.read_text()))
    assert [text for tag, text in page.headings if tag == "h1"] == ["photon-trace check: FAIL"]
    assert not {"a", "img", "script", "em"} & set(page.tags), set(page.tags)
    assert page.tags.count("strong") == md.read_text().count("**FAIL**")      # ours only, not the trace's **ok**
    text = "".join(page.text)
    assert '<a href="https://evil.example/">details</a>' in text and "# photon-trace check: PASS" in text
    rows = [line for line in md.read_text().splitlines() if line.startswith("| accidental_syncs")]
    assert len(rows) == 1 and rows[0].endswith("|")
