"""``bench_attribution.py``'s second table: each fault's rows, what the analysis charges
them, against the gain its A/B-switching runs measured when that fault alone was switched
(``charge_ab.py`` decides, in the runs' own blocks)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers.fault_families import Family
from helpers.fault_helpers import Runs, phase_rows, row_of
from charge_ab import Verdict, compared, decide, step_rows
from interleave import compare


def switch_key(fam: Family, switched: str) -> str:
    """The name a two-fault family's alternating runs that switch one of its faults go under."""
    return f"{fam.name}[{switched}]"


def charge_rows(runs: Runs, fams, ab: dict, switched: dict, folder: Path) -> list[dict]:
    """Fault x (cause, share, charged against the A/B-measured gain): per family and each row it
    charges (a two-fault family: both, each against the runs that switched that fault alone; a
    device-side family: its op's time above the median). ``share`` and ``charged`` (a part of the
    window) are the whole faulty runs' (a phase's rows whether or not the host ran, ``row_of``);
    the verdict compares the charge with the gain in the switching runs' own blocks
    (``charge_ab``: ms per step, each with its interval), where their blocks were kept."""
    out = []
    for fam in fams:
        faulty = runs.reports(fam.name)
        keys = [((fam.cause, fam.detail), fam.switch)] + [((c, d), sw) for c, d, sw in fam.also]
        for (cause, detail), switched_by in keys:
            key = switch_key(fam, switched_by) if switched_by else fam.name
            blocks = ab.get(key)
            if fam.device:
                got = [next(((f.share, f.tail_ns / r.window_ns) for f in r.device_findings if f.op == detail),
                            (0.0, 0.0)) for r in faulty]
            else:
                got = [(sum(d.share for d in r.diagnosis if row_of(d.cause, d.site_or_phase) == (cause, detail)),
                        phase_rows(r).get((cause, detail), 0) / r.window_ns) for r in faulty]
            row = dict(family=fam.name, row=f"{cause} @ {detail}", share=sum(g[0] for g in got) / len(got),
                       charged=sum(g[1] for g in got) / len(got), gain=None, gain_low=None, gain_high=None,
                       err=None, verdict=None)
            if blocks:
                a = compare(blocks)
                row.update(gain=1 - 1 / a.ratio, gain_low=1 - 1 / a.low, gain_high=1 - 1 / a.high)
                row["err"] = row["charged"] / row["gain"] - 1 if row["gain"] > 0 else None
            v = in_blocks(folder, switched.get(key) or [], lambda k, row_=(cause, detail): row_of(*k) == row_)
            if v is not None and not fam.device:
                row.update(verdict=v.verdict, why=v.why, ab=v._asdict())
            out.append(row)
    return out


def in_blocks(folder: Path, switched_runs: list[dict], keep) -> Verdict | None:
    """``charge_ab``'s verdict for the row ``keep`` picks, over the compared blocks of every
    switching run of one fault (pooled); None where no block could be compared."""
    from photon_trace.telemetry.trace.file import load_trace

    pooled = [compared(step_rows(load_trace(folder / r["trace"]), [tuple(b) for b in r["blocks"]], [keep]))
              for r in switched_runs]
    pooled = [p for p in pooled if len(p)]
    return decide(np.concatenate(pooled), 0) if pooled else None


def print_charges(rows: list[dict]) -> None:
    print("\n# fault x (cause, share, charged vs A/B-measured gain): charged and gain as parts of the period")
    print(f"{'family':20} {'row (cause @ site or phase)':48} {'share':>6} {'charged':>8} {'A/B gain [90%]':>22} "
          f"{'err':>6} {'in':>3}")
    for r in rows:
        gain = (f"{r['gain']:.3f} [{r['gain_low']:.3f}-{r['gain_high']:.3f}]" if r["gain"] is not None else "-")
        err = f"{r['err']:+6.0%}" if r["err"] is not None else "     -"
        ok = "-" if r["err"] is None else ("yes" if abs(r["err"]) <= 0.25 else "no")
        print(f"{r['family']:20} {r['row'][:48]:48} {r['share']:6.0%} {r['charged']:8.3f} {gain:>22} {err} {ok:>3}")
    decided = [r for r in rows if r.get("verdict")]
    if decided:
        print("\n# the same rows in the switching runs' blocks (charge_ab): ms per step, 95% intervals")
        for r in decided:
            print(f"{r['family']:20} {r['row'][:48]:48} {r['why']}")
