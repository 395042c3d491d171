"""What ``photon-trace import`` prints for a distributed job: each rank, then across ranks.

Per rank its file, device ops, idle, syncs, the first row of its diagnosis and its
computation–communication overlap; then how the clocks were aligned and how well they agree,
the slowest rank per step, and per rank what its collectives cost (waiting for the last rank
against the transfer), with the collectives most waited on.
"""
from __future__ import annotations

from photon_trace.cli.import_summary import _short


def _ms(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:,.3f} ms"


def _us(ns: int | None) -> str:
    if ns is None:
        return "unknown"
    return f"{ns:,} ns" if ns < 1000 else f"{ns / 1e3:,.1f} µs"


def render_ranks(trace, rr) -> str:
    """The console summary of a job (``trace`` merged by ``merge_ranks``, ``rr`` its ``RanksReport``)."""
    from photon_trace.telemetry.analysis.source_notes import source_notes
    from photon_trace.telemetry.trace.ranks import split_ranks

    out = [f"{len(rr.ranks)} ranks: {', '.join(r.file for r in rr.ranks)}", "  " + rr.alignment_text()]
    for r, t in split_ranks(trace):
        out += [f"  rank {r} note: {n}" for n in source_notes(t)]
    out += ["", "per rank (idle of its analysed stream over its window; syncs in the whole trace):",
            f"  {'rank':>4} {'device ops':>10} {'idle%':>7} {'syncs':>6} {'comm/comp overlap':>18}  first to fix"]
    for row in rr.ranks:
        idle = f"{row.idle_fraction:.1%}" if row.idle_fraction is not None else "no device"
        syncs = "unknown" if row.syncs is None else f"{row.syncs:,}"
        overlap = f"{row.overlap:.2%}" if row.overlap is not None else "no comm kernel"
        out.append(f"  {row.rank:>4} {row.device_ops:>10,} {idle:>7} {syncs:>6} {overlap:>18}  {_short(row.first_fix, 80)}")
    if rr.steps:
        out += ["", "per step, the slowest rank (its work: step time less its waits for the others in collectives):"]
        for s in rr.steps:
            each = ", ".join(f"rank {r} {_ms(s.durations[r])} (work {_ms(s.work[r])})" for r in sorted(s.durations))
            out.append(f"  step {s.step}: rank {s.slowest} slowest, by {_ms(s.spread_ns)}; {each}")
    if rr.waits:
        n = len(rr.collectives)
        out += ["", f"collectives ({n} matched across ranks; per rank: waiting for the last rank vs transfer):"]
        for w in rr.waits:
            out.append(f"  rank {w.rank}: arrived last at {w.last} of {w.collectives}; waited {_ms(w.wait_ns)}, "
                       f"transfer {_ms(w.transfer_ns)}")
        worst = sorted(rr.collectives, key=lambda c: -max(c.wait_ns(r) for r in c.starts))[:5]
        out.append("  the collectives most waited on:")
        for c in worst:
            waits = ", ".join(f"rank {r} waited {_ms(c.wait_ns(r))} / transfer {_ms(c.transfer_ns(r))}"
                              for r in sorted(c.starts))
            out.append(f"    {c.kind} #{c.index}: rank {c.last} arrived last; {waits}")
        error = rr.error_ns
        if error is not None:
            short = sum(1 for c in rr.collectives for r in c.starts if 0 < c.wait_ns(r) <= error)
            if short:
                out.append(f"  {short} wait(s) no longer than the clocks' error ({_us(error)}): not told from none")
        if rr.unmatched:
            out.append("  not matched (a rank ran more of a kind than the others): "
                       + ", ".join(f"{k} x{n}" for k, n in sorted(rr.unmatched.items())))
    elif any(r.device_ops for r in rr.ranks):
        out += ["", "collectives: none (no NCCL/RCCL kernel, no gloo range) to compare across ranks"]
    return "\n".join(out)


def ranks_json(rr) -> dict:
    """The job's analysis as JSON."""
    return {
        "alignment": rr.alignment,
        "ranks": [{**r._asdict(), "analysis": rr.reports[r.rank].to_dict(tables=False)
                   if rr.reports.get(r.rank) is not None else None} for r in rr.ranks],
        "steps": [s._asdict() for s in rr.steps],
        "waits": [w._asdict() for w in rr.waits],
        "collectives": [{"kind": c.kind, "index": c.index, "last": c.last,
                         "wait_ns": {r: c.wait_ns(r) for r in c.starts},
                         "transfer_ns": {r: c.transfer_ns(r) for r in c.starts}} for c in rr.collectives],
        "unmatched": rr.unmatched,
    }
