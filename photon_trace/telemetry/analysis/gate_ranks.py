"""The CI gate on a distributed job: every rank through the same gates, and the job across ranks.

``run_check_ranks`` reads a folder (or several files) of one trace per rank, merges them on one
clock (``telemetry/trace/importers/rank_files.py``) and checks each rank as ``run_check`` checks a
single trace: its gates come back named ``rank N: idle_fraction``, and the job fails when any
rank fails. A rank that cannot be checked (no device activity, an unknown runtime) makes the
job bad input, naming the rank. What the job shows across ranks (the slowest rank per step,
the time ranks waited in collectives for the last to arrive, the clocks' agreement) is
written beside the gates: it informs, it does not gate.
"""
from __future__ import annotations

import os
from pathlib import Path

from photon_trace.telemetry.analysis.gate import (
    EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, CheckResult, md_code, render_junit, render_markdown, run_check)
from photon_trace.telemetry.analysis.ranks import RanksReport, analyze_ranks
from photon_trace.telemetry.trace.ranks import split_ranks


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def ranks_markdown(rr: RanksReport) -> list[str]:
    """The job across ranks, for the summary: per rank, per step, per rank's collectives (a string
    from the traces, the first row to fix, as a code span: ``gate.md_code``)."""
    out = ["", "## Ranks", "", "| rank | device ops | idle | syncs | comm/comp overlap | first to fix |",
           "|---|---|---|---|---|---|"]
    for r in rr.ranks:
        idle = f"{r.idle_fraction:.2%}" if r.idle_fraction is not None else "no device"
        overlap = f"{r.overlap:.2%}" if r.overlap is not None else "—"
        out.append(f"| {r.rank} | {r.device_ops} | {idle} | {'unknown' if r.syncs is None else r.syncs} | "
                   f"{overlap} | {md_code(r.first_fix)} |")
    if rr.steps:
        out += ["", "| step | slowest rank (most work) | by | " + " | ".join(f"rank {r.rank}" for r in rr.ranks) + " |",
                "|---|---|---|" + "---|" * len(rr.ranks)]
        out += [f"| {s.step} | {s.slowest} | {_ms(s.spread_ns)} | " + " | ".join(
            f"{_ms(s.durations[r.rank])} (work {_ms(s.work[r.rank])})" if r.rank in s.durations else "—"
            for r in rr.ranks) + " |" for s in rr.steps]
    if rr.waits:
        out += ["", "| rank | arrived last | waited for the last rank | transfer |", "|---|---|---|---|"]
        out += [f"| {w.rank} | {w.last} of {w.collectives} | {_ms(w.wait_ns)} | {_ms(w.transfer_ns)} |"
                for w in rr.waits]
    return out


def run_check_ranks(inputs: list[str | os.PathLike], *, out_md: str | os.PathLike | None = None,
                    out_junit: str | os.PathLike | None = None, allow_partial: bool = False,
                    step_annotation: str | None = None, **gates) -> CheckResult:
    """Check a job (see the module docstring); ``gates``: ``run_check``'s gate options."""
    from photon_trace.telemetry.trace.file import TraceFormatError
    from photon_trace.telemetry.trace.importers.rank_files import load_ranks

    source = ", ".join(str(x) for x in inputs)
    try:
        trace = load_ranks(inputs, strict=False if allow_partial else None, step_annotation=step_annotation)
    except (TraceFormatError, OSError) as e:
        result = CheckResult(EXIT_BAD_INPUT, source=source, error=f"ranks: {e}")
    except Exception as e:   # whatever a damaged file does to a reader, CI reads bad input, not a failed gate
        result = CheckResult(EXIT_BAD_INPUT, source=source, error=f"ranks: cannot read: {type(e).__name__}: {e}")
    else:
        result = _check(trace, source, allow_partial, gates)
    if out_md is not None:
        Path(out_md).write_text(render_markdown(result), encoding="utf-8")
    if out_junit is not None:
        Path(out_junit).write_text(render_junit(result), encoding="utf-8")
    return result


def _check(trace, source: str, allow_partial: bool, gates: dict) -> CheckResult:
    all_gates, notes = [], []
    files = {e["rank"]: e["file"] for e in trace.header["ranks"]}
    for r, t in split_ranks(trace):
        one = run_check(t, allow_partial=allow_partial, **gates)
        if one.error:
            return CheckResult(EXIT_BAD_INPUT, source=source,
                               error=f"rank {r}: {one.error.replace('<trace>', files[r])}")
        all_gates += [g._replace(name=f"rank {r}: {g.name}", message=f"rank {r}: {g.message}") for g in one.gates]
        notes += [f"rank {r}: {n}" for n in one.notes]
    rr = analyze_ranks(trace)
    code = EXIT_PASS if all(g.passed for g in all_gates) else EXIT_FAIL
    # no one report stands for the job: the summary's per-rank tables do
    return CheckResult(code, all_gates, None, None, source, notes=[rr.alignment_text()] + notes,
                       sections=ranks_markdown(rr))
