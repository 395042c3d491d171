"""The demo's story in numbers, each with its interval, or why the machine was too busy to tell.

The story: pipelining removes the bubble blocking leaves (the bench's gain, ``bench_gain.py``),
and fixing the mask-upload bug removes its accidental syncs and gives the time back (the
pipelined runs of the bug's bench against the fix's, compared by
``telemetry/analysis/comparison.py``). A count of syncs is no matter of noise and is always
stated. A speed is stated only with its interval and when the comparison is valid; when the
device's own time moved between the runs, or the engine thread waited for a CPU most of a run,
the line says the machine was too busy to tell and why (the device-time change or the
run-queue share, the load average now), never a verdict the noise made. A valid result that
goes against the story is said as what it is, with the load, rather than hidden.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.comparison import NO_CLEAR_CHANGE, compare, runq_share
from photon_trace.telemetry.trace.file import load_trace


def _load_now() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"load average {load:.1f} on {os.cpu_count()} CPUs now"


def cannot_tell(why_not: str) -> str:
    """The words for a pair that does not decide: "too busy to tell" only when the machine was;
    a device whose own time moved between the runs is "cannot tell" (on the host-process device
    the host's own waiting moves the worker's speed too: it need not be the machine's load)."""
    return "too busy to tell" if "too busy" in why_not else "cannot tell"


def pipelining_lines(summary: dict) -> list[str]:
    """One line per stream count of the blocking/pipelined bench (its summary JSON)."""
    out = []
    for row in summary.get("rows", []):
        g = row.get("gain")
        if g is None:
            continue
        head = f"  pipelining, {row['streams']} stream(s): "
        if not g["valid"]:
            out.append(head + f"{cannot_tell(g['why_not'])}: {g['why_not']} ({_load_now()})")
            continue
        said = (f"{g['gain']:.3f}x steady-state tokens/s (95% interval {g['gain_low']:.3f}-{g['gain_high']:.3f}x), "
                f"the device's time per step unchanged")
        if g["verdict"] == "better":
            out.append(head + f"faster: {said}")
        elif g["verdict"] == NO_CLEAR_CHANGE:
            out.append(head + f"no clear change: {said}: the host's bookkeeping is too small a share of the step "
                              f"here for its bubble to show, or the steps vary too much ({_load_now()})")
        else:
            out.append(head + f"slower, against the story: {said} ({_load_now()}); rerun on a quieter machine")
    return out


def _pooled(paths: list[str]):
    """The pipelined runs' reports pooled (every repeat's steps), the busiest run's host figures,
    and the syncs per run."""
    traces = [load_trace(p) for p in paths]
    reports = [analyze(t) for t in traces]
    hosts = [t.header.get("host_run") for t in traces]
    known = [h for h in hosts if runq_share(h) is not None]
    pooled = dataclasses.replace(reports[0], steps=[s for r in reports for s in r.steps])
    syncs = [sum(s.count for s in r.syncs) for r in reports]
    return pooled, (max(known, key=runq_share) if known else None), syncs


def mask_fix_lines(bug: dict, fix: dict) -> list[str]:
    """The bug's pipelined runs against the fix's (their benches' summary JSONs)."""
    paths = [[t for row in s.get("rows", []) for t in row["modes"]["pipelined"]["traces"]] for s in (bug, fix)]
    if not all(paths):
        return []
    (a, ha, sa), (b, hb, sb) = _pooled(paths[0]), _pooled(paths[1])
    out = [f"  the mask-upload fix: accidental syncs per run {', '.join(map(str, sa))} with the bug, "
           f"{', '.join(map(str, sb))} fixed (a count: no noise in it)"]
    c = compare(a, b, host_runs=(ha, hb), names=("the bug's run", "the fix's run"))
    period = c.get("period")
    if not c.valid and c.decides(period):
        # the device's time moved, but the period moved beyond anything that explains
        word = "faster" if period.verdict == "better" else "slower, against the story"
        return out + [f"  the mask-upload fix's speed: {word}, beyond what the device's own change explains: "
                      f"{period.describe()}; device per step "
                      + ", ".join(f"{d.label} {d.a:.2f} -> {d.b:.2f} ms" for d in c.device)]
    if not c.valid:
        spread = ", ".join(f"{d.label} {d.a:.2f} -> {d.b:.2f} ms" for d in c.device)
        return out + [f"  the mask-upload fix's speed: {cannot_tell(c.why_not)}: {c.why_not} (device time per step "
                      f"{spread}; {_load_now()})"]
    tps = c.get("tokens_per_s")
    said = (f"{tps.ratio.point:.3f}x steady-state tokens/s (95% interval {tps.ratio.low:.3f}-{tps.ratio.high:.3f}x), "
            f"median period {c.get('period').a:.3f} -> {c.get('period').b:.3f} ms")
    if tps.verdict == "better":
        return out + [f"  the mask-upload fix's speed: faster: {said}"]
    if tps.verdict == NO_CLEAR_CHANGE:
        return out + [f"  the mask-upload fix's speed: no clear change: {said}: on this machine the synchronous "
                      f"upload's wait is short beside the step, or the steps vary too much ({_load_now()})"]
    return out + [f"  the mask-upload fix's speed: slower, against the story: {said} ({_load_now()}); rerun on a "
                  f"quieter machine"]


def story_lines(out: Path, summaries: tuple[str, str, str]) -> list[str]:
    """The story's lines from the three benches' summaries in ``out``."""
    loaded = []
    for name in summaries:
        try:
            loaded.append(json.loads((out / name).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            loaded.append({})
    return (["", "The story in numbers (each speed with its 95% interval from the runs' own steps):"]
            + pipelining_lines(loaded[0]) + mask_fix_lines(loaded[1], loaded[2]))
