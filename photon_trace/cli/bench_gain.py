"""The bench's pipelining gain with its interval, and its warning when the two modes' device times
differ (``telemetry/analysis/comparison.py``).

Per stream count, every blocking run's steps against every pipelined run's (the repeats pooled:
each keeps its own blocks of consecutive steps when resampled): the gain is pipelined tokens/s
over blocking tokens/s in the steady state, with its 95% interval. When the device's own time
per op differs between the modes beyond the band (the machine changed between the runs, or ran
something else through one mode's), or a run's engine thread waited for a CPU most of the run,
the gain and the cost model's error mix the machine with pipelining: the bench says so.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from photon_trace.telemetry.analysis.comparison import compare, runq_share


def _pooled(reports: list):
    """One report holding every repeat's steps (the first repeat's other fields)."""
    return dataclasses.replace(reports[0], steps=[s for r in reports for s in r.steps])


def _busiest(host_runs: list[dict | None]) -> dict | None:
    """The run whose engine thread waited for a CPU the largest share of it."""
    known = [h for h in host_runs if runq_share(h) is not None]
    return max(known, key=runq_share) if known else None


def gain_of(reports: dict[str, list], runs: dict[str, list]) -> dict[str, Any]:
    """The row's gain with its interval, the device ops per mode, and why the gain is not valid ("")."""
    c = compare(_pooled(reports["blocking"]), _pooled(reports["pipelined"]),
                host_runs=tuple(_busiest([x.get("host_run") for x in runs[m]]) for m in ("blocking", "pipelined")),
                names=("the blocking run", "the pipelined run"))
    tps = c.get("tokens_per_s")
    return {"gain": tps.ratio.point, "gain_low": tps.ratio.low, "gain_high": tps.ratio.high,
            "verdict": tps.verdict, "valid": c.valid, "why_not": c.why_not,
            "device": {d.key: {"blocking_ms": d.a, "pipelined_ms": d.b, "ratio": d.ratio.point,
                               "ratio_low": d.ratio.low, "ratio_high": d.ratio.high, "verdict": d.verdict}
                       for d in c.device}}


def render_gains(rows: list[dict[str, Any]]) -> list[str]:
    """The gain per row with its interval, and a warning per row whose modes' device times differ."""
    out = ["", "Pipelining gain: pipelined over blocking steady-state tokens/s, every repeat's steps pooled, "
               "with its 95% interval (from the runs' own per-step variability)"]
    warned = []
    for row in rows:
        g = row.get("gain")
        if g is None:
            continue
        dev = ", ".join(f"{k} {v['blocking_ms']:.3f} -> {v['pipelined_ms']:.3f} ms" for k, v in g["device"].items())
        out.append(f"{row['streams']:>7}  gain {g['gain']:.3f}x (95% interval {g['gain_low']:.3f}-{g['gain_high']:.3f}x"
                   f"): {g['verdict'] if g['valid'] else 'not valid'}; device per step blocking -> pipelined: {dev}")
        if not g["valid"]:
            warned.append(f"warning: {row['streams']} streams: {g['why_not']}: the gain and the cost model's error "
                          f"above mix the machine's change with pipelining's")
    return out + warned
