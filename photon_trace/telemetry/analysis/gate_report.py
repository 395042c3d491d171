"""What ``photon-trace check`` writes: the Markdown summary a CI page shows, the JUnit XML a CI
runner collects, and the console's lines of figures. Pure functions of a ``CheckResult``
(``telemetry/analysis/gate.py``); they read no files.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from photon_trace.telemetry.analysis.causes import (
    ANOTHER_THREAD, DEPLOYMENT, DEVICE_SIDE, HOST_CODE, WHO_FIXES, cause_label, who_fixes)
from photon_trace.telemetry.analysis.device_report import device_markdown as op_markdown
from photon_trace.telemetry.analysis.report import Report
from photon_trace.telemetry.analysis.views import no_work_words, steady_state_lines


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def md_code(text: object, in_table: bool = True) -> str:
    """``text`` as a Markdown code span: shown as written, whatever it holds.

    Gate messages, call sites, op names, file names and notes come from the trace, and a
    CI page renders this Markdown: a call site holding ``|``, a newline and ``# ... PASS``
    must not start a row or a heading, nor ``<a href>``, ``[x](url)`` or ``![x](url)`` make
    HTML, a link or an image. In a code span nothing is markup; what could still break out
    of it is handled here: line breaks (a span cannot hold one; whitespace runs become one
    space), backticks (the fence is one longer than the longest run inside), and, in a
    table, ``|`` (escaped as ``\\|``, which GitHub's tables take before the span)."""
    body = " ".join(str(text).split())
    if in_table:
        body = body.replace("|", "\\|")
    if not body:
        return "(empty)"
    fence = "`" * (max((len(run) for run in re.findall("`+", body)), default=0) + 1)
    pad = " " if body[0] == "`" or body[-1] == "`" else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def render_markdown(result) -> str:
    """The summary a CI job shows: verdict, gates, key numbers, what to fix first. Every string
    that may come from the trace goes in as a code span (``md_code``)."""
    out = [f"# photon-trace check: {result.verdict}", "", f"Trace: {md_code(result.source, in_table=False)}", ""]
    if result.error:
        return "\n".join(out + [f"**Error:** {md_code(result.error, in_table=False)}", ""])
    out += ["| gate | result | detail |", "|---|---|---|"]
    out += [f"| {g.name} | {'pass' if g.passed else '**FAIL**'} | {md_code(g.message)} |" for g in result.gates]
    if getattr(result, "undecided", ""):   # the regression gates passed without deciding: say it above the figures
        out += ["", f"**Cannot decide against the baseline:** {md_code(result.undecided, in_table=False)}"]
    r = result.report
    if r is not None:       # None: a capture-only trace, gated on its syncs alone
        out += ["", "## Steady state", ""] + steady_state_lines(r, lambda text: md_code(text, in_table=False))
        out += device_markdown(r)
        if r.diagnosis:
            out += _diagnosis_markdown(r.diagnosis)
        out += op_markdown(r, result.baseline, md_code, getattr(result, "tolerance", None))
    out += result.sections    # a job's ranks, each in its own section
    if result.notes:
        out += ["", "## Notes", ""] + [f"- {md_code(n, in_table=False)}" for n in result.notes]
    return "\n".join(out) + "\n"


def device_markdown(r: Report) -> list[str]:
    """Idle per stream (ours) and per device (Nsight's: all its streams together), side by side."""
    if not r.streams and not r.devices:
        return []
    out = ["", "## Idle per stream and per device", "",
           "| lane | ops | span | idle | idle % |", "|---|---|---|---|---|"]
    out += [f"| stream `{s.stream}` | {s.ops} | {_ms(s.span_ns)} | {_ms(s.idle_ns)} | {s.idle_fraction:.1%} |"
            for s in r.streams]
    out += [f"| device `{d.device}` (all {d.streams} streams) | {d.ops} | {_ms(d.span_ns)} | {_ms(d.idle_ns)} | "
            f"{d.idle_fraction:.1%} |" for d in r.devices]
    return out


def _speedup(d) -> str:
    """The predicted speedup with its range (``diagnosis``)."""
    return f"{d.predicted_speedup:.3f}x ({d.speedup_low:.3f}–{d.speedup_high:.3f})"


_SECTIONS = {
    HOST_CODE: "Diagnosis: what host code can fix, first",
    ANOTHER_THREAD: "The host blocked: another thread (the GIL), a lock, I/O or a sleep, not the phase's code",
    DEPLOYMENT: "The host descheduled: the machine ran something else (pin the engine's threads, "
                "fewer processes per core)",
    DEVICE_SIDE: "Device-side latency (not fixable from host code)",
}


def _diagnosis_markdown(diagnosis: list) -> list[str]:
    """What host code can fix first; then, apart, the host not running (another thread's, the
    deployment's) and the device's own latency, none of which the phase's code removes."""
    out = []
    for who in WHO_FIXES:
        title = _SECTIONS[who]
        rows = [d for d in diagnosis if who_fixes(d.cause) == who][:10]
        if not rows:
            continue
        # idle: the row's bubbles; charged: what removing it alone gives back (``charging``), which
        # the share and the order follow
        out += ["", f"## {title}", "",
                "| cause | site / phase | idle | charged | share | predicted speedup |", "|---|---|---|---|---|---|"]
        out += [f"| {cause_label(d.cause)} | {md_code(d.site_or_phase)} | {_ms(d.idle_ns)} | "
                f"{_ms(getattr(d, 'charged_ns', d.idle_ns))} | {d.share:.1%} | {_speedup(d)} |" for d in rows]
    return out


def steady_state_line(r: Report) -> str:
    """The steady state's figures in one console line: the window the idle gate measured, its
    idle and what it was made of, the median step and the throughput (tokens for our engine's
    traces, steps for an imported program's, which has no tokens)."""
    head = (f"steady state: {len(r.steps)} steps over {_ms(r.window_ns)}, idle {r.idle_fraction:.2%}"
            f"{no_work_words(r)} (bubbles {_ms(r.bubble_ns)}, dispatch gaps {_ms(r.dispatch_ns)}; host late "
            f"{_ms(r.host_idle_ns)}, launch latency {_ms(r.launch_idle_ns)}); median period {r.period_ms:.3f} ms")
    if r.imported:
        return f"{head}; {r.steps_per_s:,.2f} steps/s, {r.stream} busy {r.busy_fraction:.1%}"
    return (f"{head}, forward {r.forward_ms:.3f} ms; {r.tokens_per_s:,.1f} tokens/s steady, "
            f"{r.e2e_tokens_per_s:,.1f} end to end")


def junit_classname(source: str) -> str:
    """``photon_trace.check.NAME``, NAME the trace file's name up to its first dot, in the
    characters every CI's JUnit reader takes: the reports of several traces do not collide."""
    stem = Path(source).name.split(".")[0] if not source.startswith("<") else "trace"
    return "photon_trace.check." + (re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_") or "trace")


def render_junit(result) -> str:
    """JUnit XML: a suite named after the trace, one testcase per gate (one erroring "load"
    case for bad input), each with its time in seconds; the suite's time is the whole check."""
    import xml.etree.ElementTree as ET   # here: only --junit writes XML (1 ms of every check's start)

    failures = len(result.failures)
    errors = 1 if result.error else 0
    tests = str(max(len(result.gates), errors))
    seconds = f"{result.seconds:.6f}"
    suites = ET.Element("testsuites", name="photon-trace check", tests=tests, failures=str(failures),
                        errors=str(errors), time=seconds)
    stamp = datetime.fromtimestamp(result.started, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    suite = ET.SubElement(suites, "testsuite", name=f"photon-trace check: {result.source}", tests=tests,
                          failures=str(failures), errors=str(errors), skipped="0", time=seconds, timestamp=stamp)
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="trace", value=result.source)
    classname = junit_classname(result.source)
    if result.error:
        case = ET.SubElement(suite, "testcase", classname=classname, name="load", time=seconds)
        ET.SubElement(case, "error", message=result.error).text = result.error
    for g in result.gates:
        case = ET.SubElement(suite, "testcase", classname=classname, name=g.name, time=f"{g.seconds:.6f}")
        if not g.passed:
            ET.SubElement(case, "failure", message=g.message).text = f"value {g.value:.6g}, limit {g.limit:.6g}"
        else:
            ET.SubElement(case, "system-out").text = g.message
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
