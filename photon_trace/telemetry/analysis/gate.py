"""The CI gate: does a trace keep the device busy and free of accidental syncs?

``run_check`` analyses a trace's steady state and applies these gates:

* ``idle_fraction``: the compute stream's idle fraction is at most ``max_idle_fraction``: its
  idle while the engine had work; the time it had none (``no_work``: a server between
  requests) is said beside it and not gated, and so is idle while the host was descheduled
  (``host_descheduled``: the machine ran something else; the message says how much there was);
* ``accidental_syncs``: no unexpected host wait anywhere in the trace (warm-up and
  drain included: a sync there is still a bug waiting to move into the loop);
* with a baseline, ``idle_regression``: the mean idle per step grew by no more
  than ``tolerance`` of the baseline's median period, and ``period_regression``:
  the median period grew by no more than ``tolerance`` (both relative to the
  baseline's period, so one knob says "this much slower is a regression"), where a
  growth is a regression only when its 95% interval from the two runs' per-step
  variability excludes no change as well (``comparison.compare``; the period's part
  that the device's own change per step explains is not the code's). When the device's
  own time per op changed between the two runs of one workload beyond its noise (the
  machine changed: another load, another clock), or either run's engine thread waited
  for a CPU most of the run (too busy to tell), the two cannot decide: they pass, saying
  ``cannot decide`` and why, and the summary line says it (``CheckResult.undecided``):
  exit 0, since a CI job cannot fix the machine, with the reason in its log.

Exit codes: 0 every gate passed, 1 a gate failed, 2 bad input (unreadable,
foreign or corrupt trace or baseline, or one with nothing to analyse). A truncated
trace file (no end line: the run crashed or is still writing; or cut inside a
line) is bad input too, since the gate cannot vouch for the part that is missing, and
so is a damaged PyTorch profiler trace; ``allow_partial`` checks what is valid and
says so in the notes.
A Markdown summary and JUnit XML (one testcase per gate, with times) are written when asked
(``telemetry/analysis/gate_report.py``).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import NamedTuple, Union

from photon_trace.telemetry.analysis import Report, analyze, sync_sites
from photon_trace.telemetry.analysis.causes import DEPLOYMENT, Cause, who_fixes
from photon_trace.telemetry.analysis.device_report import device_lines
from photon_trace.telemetry.analysis.gaps import stream_mask
from photon_trace.telemetry.analysis.gate_report import (  # noqa: F401 (the renderers, as gate's API)
    _diagnosis_markdown, device_markdown, md_code, render_junit, render_markdown, steady_state_line)
from photon_trace.telemetry.analysis.source_notes import (NO_DEVICE_ACTIVITY, capture_only, source_notes, stopped_early,
                                                          unknown_runtime)
from photon_trace.telemetry.analysis.whole_run import WholeRun, whole_run_and_window, whole_run_bubbles
from photon_trace.telemetry.analysis.window import compute_extent, steady_state_window
from photon_trace.telemetry.trace.lanes import primary_stream
from photon_trace.telemetry.trace.plausible import check_trace, ends_before_start
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.trace.rows import TraceFormatError

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_BAD_INPUT = 2

UNDECIDED = "cannot decide"
"""What a regression gate says, passing, when the device's own speed changed between the trace and
its baseline, or the machine kept either run's engine thread off the CPU most of the run: their
periods are not comparable (``comparison``); the summary line says it too."""

DEFAULT_MAX_IDLE_FRACTION = 0.05
DEFAULT_TOLERANCE = 0.10

TraceLike = Union[Trace, str, os.PathLike]

class BadInput(Exception):
    """The trace or baseline cannot be checked."""


class Gate(NamedTuple):
    name: str
    passed: bool
    message: str
    value: float
    limit: float
    seconds: float = 0.0   # evaluating this gate (the analysis it reads is the check's, not its own)


@dataclass
class CheckResult:
    exit_code: int
    gates: list[Gate] = field(default_factory=list)
    report: Report | None = None
    baseline: Report | None = None
    source: str = "<trace>"
    error: str | None = None        # why the input was bad (exit code 2)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0            # the whole check: loading, analysing, the gates
    started: float = field(default_factory=time.time)   # wall clock, for the JUnit timestamp
    sections: list[str] = field(default_factory=list)   # more Markdown for the summary (a job's ranks)
    tolerance: float | None = None  # with a baseline: the growth a regression gate allows
    undecided: str = ""     # why the regression gates could not decide: the machine changed or was too busy (they pass)

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_PASS

    @property
    def verdict(self) -> str:
        return {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_BAD_INPUT: "BAD INPUT"}[self.exit_code]

    @property
    def failures(self) -> list[Gate]:
        return [g for g in self.gates if not g.passed]

    def summary(self) -> str:
        """One line for the console (a trace's strings may hold line breaks: not here)."""
        if self.error:
            text = f"photon-trace check: BAD INPUT: {self.error}"
        elif self.passed:
            text = f"photon-trace check: PASS ({len(self.gates)} gates) on {self.source}"
            if self.undecided:
                text += f"; {UNDECIDED} against the baseline: {self.undecided}"
        else:
            text = "photon-trace check: FAIL: " + "; ".join(g.message for g in self.failures)
        return one_line(text)

    def details(self) -> list[str]:
        """The figures behind the verdict, one line each: every gate the summary line did not
        already say (all of them on a pass), then the steady state's."""
        said = set() if self.passed else {g.name for g in self.failures}
        lines = [f"{g.name}: {'pass' if g.passed else 'FAIL'}: {g.message}" for g in self.gates if g.name not in said]
        steady = [steady_state_line(self.report)] if self.report is not None else []   # None: a capture only
        device = device_lines(self.report, self.baseline, self.tolerance)
        return [one_line(line) for line in lines + steady + device]


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) as one space."""
    return " ".join(text.split())


def _load(x: TraceLike, what: str, load: dict) -> tuple[Trace, str, list[str]]:
    """The trace, its name, and the loader's warnings as notes (one line each: a CI log reads
    them, not Python's warning format with its install path and source line)."""
    if isinstance(x, Trace):
        return x, f"<{what}>", []
    import warnings

    from photon_trace.telemetry.trace.file import TraceFormatError, TraceTruncatedWarning
    from photon_trace.telemetry.trace.importers import load_any
    from photon_trace.telemetry.trace.importers.kineto_read import KinetoPartialWarning
    allow_partial = bool(load.get("allow_partial"))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trace = load_any(x, strict=False if allow_partial else None, step_annotation=load.get("step_annotation"))
    except (TraceFormatError, OSError) as e:
        raise BadInput(f"{what}: {e}") from None
    except Exception as e:   # whatever a damaged file does to the loader, CI must not read it as a failed gate
        raise BadInput(f"{what}: {x}: cannot read: {type(e).__name__}: {e}") from None
    stopped = stopped_early(trace)
    if not allow_partial and stopped:
        raise BadInput(f"{what}: {x}: {stopped}; check what is there with --allow-partial")
    if not allow_partial and (trace.header.get("truncated") or trace.header.get("incomplete")):
        how = ("cut inside a line" if trace.header.get("truncated") else
               "no end line (the run crashed or is still writing)")
        raise BadInput(f"{what}: {x}: truncated trace: {how}; check what is there with --allow-partial")
    # A truncation and a profiler trace's skipped events are in the header: ``_notes`` says them.
    said = (TraceTruncatedWarning, KinetoPartialWarning)
    return trace, str(x), [one_line(str(w.message)) for w in caught if not issubclass(w.category, said)]


def _validate(trace: Trace, name: str) -> None:
    for kind in ("host_spans", "device_spans", "waits"):
        bad = ends_before_start(getattr(trace, kind))
        if bad is not None:
            raise BadInput(f"{name}: corrupt trace: a {kind[:-1].replace('_', ' ')} ends before it starts ({bad})")
    try:   # a loaded file was checked on load; a trace built in memory is checked here
        check_trace(trace, name)
    except TraceFormatError as e:
        raise BadInput(str(e)) from None
    source = trace.header.get("source", {}).get("format")
    why = unknown_runtime(trace)
    if why:
        raise BadInput(f"{name}: host waits on the device cannot be read: {why}; the accidental-sync gate "
                       f"cannot decide")
    if capture_only(trace):
        return      # idle is not gated (``_gates``); the syncs are, on the host's calls alone
    if not trace.device_spans and source in NO_DEVICE_ACTIVITY:
        raise BadInput(f"{name}: no device activity: {NO_DEVICE_ACTIVITY[source]}; nothing to gate on")
    ops = int(stream_mask(trace.device_spans, primary_stream(trace)).sum())
    if not ops:
        raise BadInput(f"{name}: no compute-stream ops to analyse")
    if ops == 1 and source in NO_DEVICE_ACTIVITY:
        raise BadInput(f"{name}: one device op on {primary_stream(trace)}: no gap between ops to measure idle by; "
                       f"nothing to gate on")
    if not trace.steps:
        raise BadInput(f"{name}: no step records to analyse")


def _analyse(x: TraceLike | Report, what: str, load: dict | None = None, whole: bool = False
             ) -> tuple[Report | None, Trace | None, str, list[str], WholeRun | None]:
    """(the report, the trace, its name, warnings, and with ``whole`` the sync gate's whole-run pass)."""
    if isinstance(x, Report):
        return x, None, f"<{what} report>", [], None
    trace, name, warned = _load(x, what, load or {})
    _validate(trace, name)
    if capture_only(trace):
        return None, trace, name, warned, None
    try:
        window = steady_state_window(trace)
        # made first (after the report it was the check's peak of memory at ten million spans), with the
        # window's splits where one pass makes both; a window that is the whole run has them in the report
        run, made = whole_run_and_window(trace, window) if whole and window != compute_extent(trace) else (None, None)
        # the other streams' idle split by cause is in no gate and no check output (`import`
        # and the API keep it): at 5M Nsight kernels it was a third of the check
        report = analyze(trace, window, stream_causes=False, made=made)
    except Exception as e:  # a structurally valid trace that still cannot be analysed
        raise BadInput(f"{name}: cannot analyse: {type(e).__name__}: {e}") from None
    if not report.steps:
        raise BadInput(f"{name}: no complete steps in the steady-state window")
    return report, trace, name, warned, run


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _capture_gate(trace: Trace) -> Gate:
    g = (trace.header.get("source") or {}).get("graphs") or {}
    return Gate("idle_fraction", True,
                f"not gated: a CUDA-graph capture only ({g.get('captures', 0)} capture(s) recorded "
                f"{g.get('captured_launches', 0)} launches, no graph ran; the device ran {len(trace.device_spans)} "
                f"op(s)): the device was not meant to be busy, so its idle is no verdict", 0.0, 0.0)


def _gates(report: Report | None, trace: Trace | None, baseline: Report | None,
           max_idle_fraction: float, tolerance: float, allow_syncs: tuple[str, ...] = (),
           hosts: tuple[dict | None, dict | None] = (None, None), whole: WholeRun | None = None
           ) -> tuple[list[Gate], str]:
    """Each gate in order, timed (its JUnit test case's time), and why the regression gates could
    not decide ("" when they could, or there is no baseline)."""
    undecided = ""

    def regressions() -> list[Gate]:
        nonlocal undecided
        gates, undecided = _regressions(report, baseline, tolerance, hosts)
        return gates

    if report is None:      # a capture-only trace: its syncs alone
        checks = [lambda: _capture_gate(trace), lambda: _sync_gate(None, trace, allow_syncs)]
    else:
        checks = [lambda: _idle_gate(report, max_idle_fraction), lambda: _sync_gate(report, trace, allow_syncs, whole)]
    if report is not None and baseline is not None:
        checks.append(regressions)
    gates = []
    for check in checks:
        t0 = time.perf_counter()
        made = check()
        made = made if isinstance(made, list) else [made]
        before = whole.seconds if whole is not None and made[0].name == "accidental_syncs" else 0.0
        gates += [g._replace(seconds=(time.perf_counter() - t0 + before) / len(made)) for g in made]
    return gates, undecided


def descheduled_fraction(report: Report) -> float:
    """The share of the window the device idled while the host was descheduled (runnable, not
    running: the machine ran something else). No code change removes it, so the idle gate
    does not count it; its message says how much there was."""
    ns = sum(d.idle_ns for d in report.diagnosis if who_fixes(d.cause) == DEPLOYMENT)
    work = report.work_ns or report.window_ns   # idle_fraction's denominator: the time with work
    return min(ns / work, report.idle_fraction) if work else 0.0


def _idle_gate(report: Report, max_idle_fraction: float) -> Gate:
    # the row with the most of the idle the gate counts (the ranking every report shows puts host
    # code first: a tick's 90 us launch would be named over a hook blocking 2 ms in the loop)
    top = max((d for d in report.diagnosis if who_fixes(d.cause) != DEPLOYMENT), key=lambda d: d.idle_ns,
              default=None)
    why = f" (largest: {top.cause} at {top.site_or_phase}, {_ms(top.idle_ns)})" if top else ""
    desched = descheduled_fraction(report)
    fraction = report.idle_fraction - desched
    ok = fraction <= max_idle_fraction
    besides = (f" (of {report.idle_fraction:.2%} in all: {desched:.2%} with the host or its device worker "
               f"descheduled, the machine running something else, is not counted)") if desched else ""
    # The gate is on the analysed stream; the device view (all streams together) is said beside it.
    shared = [d for d in report.devices if d.streams > 1]
    devices = ("; per device, all streams together: " + ", ".join(f"{d.device} {d.idle_fraction:.2%}"
                                                                  for d in shared)) if shared else ""
    span = (f"{_ms(report.work_ns)} with work ({report.no_work_fraction:.1%} of the {_ms(report.window_ns)} "
            f"window had no work: not gated)" if report.no_work_ns else _ms(report.window_ns))
    return Gate("idle_fraction", ok,
                f"steady-state idle fraction {fraction:.2%} of {report.stream}{besides} over "
                f"{len(report.steps)} steps, {span}, {'within' if ok else 'is over'} the limit "
                f"{max_idle_fraction:.2%}" + ("" if ok else why) + devices,
                fraction, max_idle_fraction)


def _sync_gate(report: Report | None, trace: Trace | None, allow_syncs: tuple[str, ...],
               made: WholeRun | None = None) -> Gate:
    """Syncs anywhere in the run, each with the idle it cost over the whole run; the count in the
    steady-state window (where the idle gate and the dashboard count) is said beside it. A
    capture-only trace (``report`` None) has no analysis: its syncs are listed without idle."""
    def mine(rows: list) -> tuple[list, list]:
        allowed = [s for s in rows if any(fnmatchcase(s.site, p) for p in allow_syncs)]
        return [s for s in rows if s not in allowed], allowed

    whole = trace is not None
    if whole:
        sites, allowed = mine(sync_sites(trace, whole_run_bubbles(report, trace, made)))
    else:
        sites, allowed = mine(report.syncs)
    count = sum(s.count for s in sites)
    label = Cause.ACCIDENTAL_SYNC.label
    if count:
        listed = ", ".join(f"{s.site} ({s.reason}) x{s.count}, {_ms(s.idle_ns)} idle" for s in sites)
        if not whole:
            where = " in the steady-state window"
        elif report is None:
            where = " in the whole trace"
        else:
            in_window = sum(s.count for s in mine(report.syncs)[0])
            where = (f" in the whole trace ({in_window} in the steady-state window of {len(report.steps)} steps, "
                     f"where idle is measured)")
        msg = f"{count} {label}{'s' if count > 1 else ''}{where}: {listed}"
    else:
        msg = f"no {label}s" + (" in the whole trace" if whole else " in the steady-state window")
    if allowed:
        msg += "; allowed: " + ", ".join(f"{s.site} x{s.count}, {_ms(s.idle_ns)} idle" for s in allowed)
    return Gate("accidental_syncs", count == 0, msg, count, 0)


def _regressions(report: Report, baseline: Report, tolerance: float,
                 hosts: tuple[dict | None, dict | None] = (None, None)) -> tuple[list[Gate], str]:
    """Idle per step and the median period against the baseline's, each a verdict only where
    its interval and the band decide (``comparison.compare``, band: ``tolerance`` of the baseline's
    period); none when the pair is too busy to tell, and where the device's own speed changed only
    those beyond what that change explains (``Comparison.decides``; the others ``UNDECIDED``). Also
    why a gate could not decide ("" when each did)."""
    # imported here: only a check against a baseline compares (2 ms of every other check's start)
    from photon_trace.telemetry.analysis.comparison import NO_CLEAR_CHANGE, compare
    try:
        c = compare(baseline, report, band=tolerance, host_runs=hosts)
    except ValueError as e:
        raise BadInput(f"cannot compare with the baseline: {e}") from None
    gates, undecided = [], ""
    for name, key in (("idle_regression", "idle_per_step"), ("period_regression", "period")):
        d = c.get(key)
        if not c.decides(d):
            gates.append(Gate(name, True, f"{UNDECIDED}: {c.why_not}; {d.describe()}", d.delta.point, d.band))
            undecided = c.why_not
            continue
        ok = d.verdict != "worse"
        word = {"worse": "a regression", "better": "better", NO_CLEAR_CHANGE: NO_CLEAR_CHANGE}[d.verdict]
        beyond = " beyond what the device's own change explains" if not c.valid else ""
        gates.append(Gate(name, ok, f"{d.describe()} against the baseline: {word}{beyond}; device per step: "
                                    + ", ".join(f"{x.label} x{x.ratio.point:.3f}" for x in c.device),
                          d.delta.point, d.band))
    return gates, undecided


def _notes(trace: Trace | None) -> list[str]:
    return source_notes(trace) if trace is not None else []


def run_check(trace_or_path: TraceLike, baseline: TraceLike | Report | None = None, *,
              max_idle_fraction: float = DEFAULT_MAX_IDLE_FRACTION, tolerance: float = DEFAULT_TOLERANCE,
              out_md: str | os.PathLike | None = None, out_junit: str | os.PathLike | None = None,
              allow_syncs: tuple[str, ...] = (), allow_partial: bool = False,
              step_annotation: str | None = None) -> CheckResult:
    """Check a trace (a ``Trace``, our trace file or a PyTorch profiler trace) against the gates;
    see the module docstring. ``allow_syncs``: call-site patterns (fnmatch) whose syncs the
    program means to make; they are listed but do not fail the gate. ``allow_partial``: a
    truncated or damaged trace (our file without its end line or cut inside a line, a damaged
    profiler trace) is checked as far as it is valid instead of being bad input.
    ``step_annotation``: the annotation a profiler trace's steps are taken from."""
    if not 0.0 <= max_idle_fraction <= 1.0:
        raise ValueError(f"max_idle_fraction is a fraction from 0 to 1, got {max_idle_fraction}")
    if not tolerance >= 0.0:
        raise ValueError(f"tolerance must be zero or more, got {tolerance}")
    started, t0 = time.time(), time.perf_counter()
    load = {"allow_partial": allow_partial, "step_annotation": step_annotation}
    try:
        report, trace, source, warned, whole = _analyse(trace_or_path, "trace", load, whole=True)
        base, base_trace = _analyse(baseline, "baseline", load)[:2] if baseline is not None else (None, None)
        if baseline is not None and base is None:     # no steady state: the regression gates would vanish
            raise BadInput("baseline: a CUDA-graph capture only (captured, no graph ran): no steady state to "
                           "compare against")
    except BadInput as e:
        result = CheckResult(EXIT_BAD_INPUT, source=str(trace_or_path) if not isinstance(trace_or_path, Trace)
                             else "<trace>", error=str(e))
    else:
        hosts = tuple((t.header.get("host_run") if t is not None else None) for t in (base_trace, trace))
        gates, undecided = _gates(report, trace, base, max_idle_fraction, tolerance, allow_syncs, hosts, whole)
        code = EXIT_PASS if all(g.passed for g in gates) else EXIT_FAIL
        result = CheckResult(code, gates, report, base, source, notes=_notes(trace) + warned,
                             tolerance=tolerance if base is not None else None, undecided=undecided)
    result.started, result.seconds = started, time.perf_counter() - t0
    if out_md is not None:
        Path(out_md).write_text(render_markdown(result), encoding="utf-8")
    if out_junit is not None:
        Path(out_junit).write_text(render_junit(result), encoding="utf-8")
    return result
