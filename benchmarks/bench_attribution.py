"""Does the analysis tell the truth about injected faults? Each fault family of
``tests/helpers/fault_families.py`` runs through the real engine beside the same run
without it (back to back, ``--repeats`` times), and the table compares what the analysis
says with what was measured independently:

* **said**: the costliest cause the host made (cause @ site or phase), and whether it is
  the family's;
* **reported**: device idle per step the analysis charges to the family's cause and site
  (less what it charges there in the run without the fault); a phase's row counts its
  host-late time whether or not the host ran (``row_of``: a sleep is host blocked, a busy
  loop beside other jobs partly host descheduled), and so does **said**, while **predicted**
  is the diagnosis's host-code row alone;
* **idle+**: the device idle per step the fault added, whatever its cause (faulty less
  clean: independent of how the analysis labels it); both per-step medians over the
  steady state, which a machine stalling a run now and then cannot move (means for an
  intermittent fault); **growth**: the mean step period's growth; **delay**: the
  injected delay per step, where the family injects one (all in ms);
* **predicted**: the diagnosis's predicted speedup from removing the family's row (its
  range in brackets), from the runs with the fault; **observed**: the speedup removing it
  gave, measured within runs that switch the fault on and off every ``--ab-ticks`` ticks
  (``interleave.py``: each block with the fault against the blocks without it on either
  side, over the analysis's steady window; a shared machine's drift over seconds, larger
  than a sync's gain, cancels), pooled over ``--ab-repeats`` runs, with a 90% bootstrap
  interval over the blocks; **err**: predicted gain over observed gain, minus 1 (gain =
  speedup - 1), and **in**: whether the prediction is within 25% of the observed gain;
  **run pairs**: the same speedup from whole runs, each faulty run against the clean run
  recorded just before it (median, lowest and highest pair): what the drift does to it;
* a device-side family (``slow_forward``) makes no bubble: **said** is its device-side finding,
  and **predicted** what the window would be were the op's time above its median gone;
* **busy+**: how much longer per step the device was busy in the faulty runs (ms: it ran
  slower, e.g. beside a host that keeps a core busy, or did more), and **idle-only**: the
  speedup removing the fault gives were the device as busy as with it (only its idle per
  step going back to the clean runs'): the part of the observed gain an idle-based
  prediction can see; the second **err** compares the prediction with that.

A second table gives each family's rows with their charge (``analysis/charging.py``: what the
analysis says removing that row gives back, as a part of the window; a phase's rows whether or
not the host ran) against the part of the period removing the fault gave back in the switching
runs, with its 90% interval; a family of two faults at once (``two_faults``) has a row for each,
each against switching runs that switch that fault alone and leave the other on. The charge there
is the whole faulty runs', recorded minutes from the switching runs: the third table reads it in
the switching runs' own blocks, beside the period and the device idle their removal gave back,
each with its interval, and says whether the charge is within 25% of the gain, outside, or the
data cannot decide (``charge_ab.py``).

The last row of the first table is the pipelining the blocking loop lacks: the blocking run's prediction for
removing every host-made cause at once, observed on one engine switched between the two
loops (``interleave.depth_switch``).

Prints numbers only; never fails on speed. The machine it runs on is usually shared:
read ratios within a run, and repeat.

    python benchmarks/bench_attribution.py     # ~9 min: 16 streams x 512 tokens, 2 runs + 4 switching runs a family
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # the fault families live with the tests that use them

from helpers.fault_families import BASELINES, BY_NAME, ENGINES, FAMILIES, Family  # noqa: E402
from helpers.device_faults import slowable  # noqa: E402
from helpers.fault_helpers import GATE, Runs, device_made, median_ms, phase_rows, row_of, top_host_cause  # noqa: E402
from interleave import compare, depth_switch, run_alternating  # noqa: E402
from attribution_charges import charge_rows, print_charges, switch_key  # noqa: E402
from photon_trace.workload import Workload, engine_settings, prepare  # noqa: E402

MS = 1e6


def charged(reports, cause: str, detail: str) -> float:
    return median_ms(reports, lambda b: row_of(b.cause, b.detail) == (cause, detail))


def mean_period(reports) -> float:
    return sum(r.mean_period_ms for r in reports) / len(reports)


def started_ns(trace) -> int:
    return min(s.t0 for s in trace.host_spans)


def paired_speedups(faulty: list, base: list) -> list[float]:
    """Each faulty run's mean period over that of the baseline run recorded last before it
    (the first baseline run where none was): the speedup its removal gave, pair by pair.
    ``faulty`` and ``base`` are (trace, report, path) runs, all on one clock (one process)."""
    bases = sorted(((started_ns(t), r) for t, r, _ in base), key=lambda x: x[0])
    out = []
    for t, r, _ in faulty:
        before = [b for t0, b in bases if t0 < started_ns(t)]
        b = before[-1] if before else bases[0][1]
        out.append(r.mean_period_ms / b.mean_period_ms)
    return out


def prediction(report, row) -> tuple[float, float, float]:
    """(point, low, high) predicted speedup for removing the diagnosis ``row`` (None: no such row)."""
    if row is None:
        return 1.0, 1.0, 1.0
    s = row.predicted_speedup
    return s, getattr(row, "speedup_low", s), getattr(row, "speedup_high", s)


def host_free(report) -> tuple[float, float, float]:
    """Were the host never late (the blocking run's prediction for pipelining)."""
    if hasattr(report, "host_free_speedup"):
        return report.host_free_speedup
    idle = sum(d.idle_ns for d in report.diagnosis if not device_made(d))   # before: window / (window - idle)
    s = report.window_ns / (report.window_ns - idle) if report.window_ns > idle else float("inf")
    return s, s, s


def make_engines(args, names):
    from photon_trace.engine.engine import Engine

    plain = Workload(streams=args.streams, tokens=args.tokens, seed=3)
    constrained = Workload(streams=args.streams, tokens=args.tokens, seed=3, constrained="point",
                           constrained_share=1.0)
    sizing = engine_settings(plain)
    engines, workloads = {}, {}
    for name in names:
        spec = dict(ENGINES[name])
        wl = constrained if spec.pop("constrained") else plain
        with slowable() as register:        # a worker a device-side family can slow
            eng = Engine(model=args.model, backend="cpu", **sizing, **spec)
            register(eng)
        engines[name] = eng
        workloads[name] = prepare(eng, wl)
    return engines, workloads


def run_family(runs: Runs, fam: Family, eng, prepared, period_s: float) -> None:
    fault = fam.inject(eng, period_s)
    runs.run(fam.name, eng, prepared, fault)
    delay = getattr(fault, "delay", None)
    if delay is not None:
        steps = len(runs[fam.name][-1][0].steps)
        runs.delays.setdefault(fam.name, []).append(sum(delay.took) * 1e3 / steps)   # ms per step


def record(args, fams) -> tuple[Path, dict]:
    """Run every family and its baseline ``--repeats`` times, then each family switched on and
    off in alternating blocks of one run (``--ab-repeats`` runs); the traces go to ``--out``."""
    names = sorted({f.engine for f in fams} | {"plain", "blocking"} | ({"constrained"} if any(
        f.baseline == "clean_constrained" for f in fams) else set()))
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-attr-"))
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("*.trace.jsonl")):    # the table reads every trace there: old ones would join the new
        sys.exit(f"{out} already holds traces: give an empty or new folder (or --traces {out} to analyse them)")
    engines, workloads = make_engines(args, names)
    runs = Runs(out)
    runs.delays = {}
    try:
        periods = {}
        for _ in range(args.repeats):
            for name in names:
                if name in BASELINES:
                    rep = runs.run(BASELINES[name], engines[name], workloads[name])
                    # faults are sized from the first clean run only: every run of a family, the
                    # switching ones included, then injects the same delay (the prediction from
                    # the whole runs and the gain observed in the switching ones are of one fault)
                    periods.setdefault(name, rep.mean_period_ms / 1e3)
            for fam in fams:
                eng = engines[fam.engine]
                if fam.baseline not in BASELINES.values():      # a faulty baseline: run it beside
                    run_family(runs, BY_NAME[fam.baseline], eng, workloads[fam.engine], periods[fam.engine])
                run_family(runs, fam, eng, workloads[fam.engine], periods[fam.engine])
        ab = record_interleaved(args, fams, engines, workloads, periods, out / "interleaved") if args.ab_repeats else {}
    finally:
        for eng in engines.values():
            eng.close()
    (out / "delays.json").write_text(json.dumps(runs.delays))
    (out / "interleaved.json").write_text(json.dumps(ab))
    return out, runs.delays


def record_interleaved(args, fams, engines, workloads, periods, folder: Path) -> dict[str, list]:
    """Per family (and blocking -> pipelined): the compared blocks of ``--ab-repeats`` runs of its
    engine with the fault switched on and off every ``--ab-ticks`` ticks (``interleave``); each
    run's blocks go to ``switched.json`` beside its trace (the charges are read in them)."""
    folder.mkdir(parents=True, exist_ok=True)
    ab: dict[str, list] = {}
    switched_runs: dict[str, list] = {}
    for i in range(args.ab_repeats):
        for fam in fams:
            eng = engines[fam.engine]
            # several faults at once: each switched alone, the others left on (what removing it gives)
            for key, switched in ((fam.name, None),) if not fam.also else [
                    (switch_key(fam, sw), sw) for sw in [fam.switch] + [a[2] for a in fam.also]]:
                fault = fam.inject(eng, periods[fam.engine], switched) if switched else fam.inject(
                    eng, periods[fam.engine])
                run = run_alternating(eng, workloads[fam.engine], folder / f"{key}-{i}.trace.jsonl", GATE.set,
                                      fault, args.ab_ticks, start_on=bool(i % 2))
                ab.setdefault(key, []).extend(run.pairs)
                switched_runs.setdefault(key, []).append(dict(trace=run.path.name, blocks=run.blocks))
        eng = engines["plain"]
        ab.setdefault(PIPELINING, []).extend(run_alternating(
            eng, workloads["plain"], folder / f"pipelining-{i}.trace.jsonl", depth_switch(eng), None, args.ab_ticks,
            start_on=bool(i % 2), rest_on=False).pairs)
    (folder / "switched.json").write_text(json.dumps(switched_runs))
    return ab


PIPELINING = "blocking->pipelined"


def load_runs(folder: Path) -> Runs:
    """The traces of a recorded benchmark (``<name>-<i>.trace.jsonl``), analysed by this code."""
    from photon_trace.telemetry.analysis import analyze
    from photon_trace.telemetry.trace.file import load_trace

    runs = Runs(folder)
    def order(p: Path):     # <name>-<repeat>.trace.jsonl, repeats in number order (10 after 9)
        name, i = p.name.removesuffix(".trace.jsonl").rsplit("-", 1)
        return name, int(i)

    for path in sorted(folder.glob("*.trace.jsonl"), key=order):
        name = order(path)[0]
        trace = load_trace(path)
        runs.runs.setdefault(name, []).append((trace, analyze(trace), path))
    return runs


def table_rows(runs: Runs, fams, delays: dict, ab: dict) -> list[dict]:
    rows = []
    for fam in fams:
        faulty, base = runs.reports(fam.name), runs.reports(fam.baseline)
        top = faulty[0].diagnosis[0] if faulty[0].diagnosis else None
        row = (fam.cause, fam.detail)
        # an intermittent fault hits some steps only: per-step means, not medians
        per = (lambda reps, keep: per_step_mean(reps, keep)) if fam.intermittent else median_ms
        preds = [prediction(r, next((d for d in r.diagnosis if (d.cause, d.site_or_phase) == row), None))
                 for r in faulty]
        said = f"{top.cause} @ {top.site_or_phase} ({top.share:.0%})" if top else "-"
        # a device-side family has no host row at all: its finding decides below
        right = not fam.device and top_host_cause(faulty[0]) == (fam.top or row)
        if fam.also:        # several faults at once: theirs are the costliest host rows (a phase's whether
            mine = {row} | {(c, d) for c, d, _ in fam.also}     # or not the host ran), in any order
            charged = phase_rows(faulty[0])
            right = set(sorted(charged, key=charged.get, reverse=True)[:len(mine)]) == mine
        if fam.device:      # no bubble: the device-side finding, and removing its tail
            finds = [next((f for f in r.device_findings if f.op == fam.detail), None) for r in faulty]
            said = finds[0].words if finds[0] else "no device-side finding"
            right = all(finds)
            preds = [(x, x, x) for x in (r.window_ns / (r.window_ns - (f.tail_ns if f else 0)) for r, f in
                                          zip(faulty, finds))]
        rows.append(dict(
            family=fam.name, said=said, right=right,
            # a phase's row whether or not the host ran in it (row_of): a sleep is host blocked
            reported=(per(faulty, lambda b: row_of(b.cause, b.detail) == row)
                      - per(base, lambda b: row_of(b.cause, b.detail) == row)),
            injected=per(faulty, every) - per(base, every),
            growth=mean_period(faulty) - mean_period(base),
            delay=sum(delays[fam.name]) / len(delays[fam.name]) if delays.get(fam.name) else None,
            predicted=sum(p[0] for p in preds) / len(preds), low=min(p[1] for p in preds),
            high=max(p[2] for p in preds), period=mean_period(base),
            **observed(runs[fam.name], runs[fam.baseline], ab.get(fam.name)), **busy_split(faulty, base)))
    blk, pipe = runs.reports("clean_blocking"), runs.reports("clean")
    preds = [host_free(r) for r in blk]
    idle = median_ms(blk, every) - median_ms(pipe, every)
    rows.append(dict(
        family=PIPELINING, said="-", right=True, reported=idle, injected=idle,
        growth=mean_period(blk) - mean_period(pipe), delay=None,
        predicted=sum(p[0] for p in preds) / len(preds), low=min(p[1] for p in preds), high=max(p[2] for p in preds),
        period=mean_period(pipe), **observed(runs["clean_blocking"], runs["clean"], ab.get(PIPELINING)),
        **busy_split(blk, pipe)))
    return rows


def observed(faulty: list, base: list, blocks: list | None) -> dict:
    """The observed speedup: from the switching runs' compared ``blocks`` where there are
    some (with a 90% bootstrap interval), else the median of the run pairs (lowest-highest
    pair); ``runs``: the run pairs' median either way."""
    pairs = paired_speedups(faulty, base)
    runs = dict(runs=median(pairs), runs_low=min(pairs), runs_high=max(pairs))
    if blocks:
        ab = compare(blocks)
        return dict(observed=ab.ratio, observed_low=ab.low, observed_high=ab.high, blocks=ab.blocks, **runs)
    return dict(observed=runs["runs"], observed_low=runs["runs_low"], observed_high=runs["runs_high"], blocks=0,
                **runs)


def busy_split(faulty, base) -> dict:
    """The observed gain split in two: ``busy_plus``, how much longer the device was busy per
    step in the faulty runs (ms; the device ran slower, or did more), and ``idle_only``, the
    speedup the fault's removal would give were the device as busy as in the faulty runs (only
    the idle per step going back to the clean runs'): what an idle-based prediction can see."""
    idle_f, idle_c = per_step_mean(faulty, every), per_step_mean(base, every)
    busy_f, busy_c = mean_period(faulty) - idle_f, mean_period(base) - idle_c
    return dict(busy_plus=busy_f - busy_c, idle_only=mean_period(faulty) / (busy_f + idle_c))


def every(bubble) -> bool:
    return True


def per_step_mean(reports, keep) -> float:
    return sum(b.duration_ns for r in reports for b in r.bubbles if keep(b)) / sum(len(r.steps) for r in reports) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=512,
                    help="per request: long enough for ~30 switching blocks in the steady window")
    ap.add_argument("--repeats", type=int, default=2, help="whole runs with and without each fault")
    ap.add_argument("--ab-repeats", type=int, default=4,
                    help="runs per family alternating blocks with and without it: the observed gain's measure "
                         "(0: run pairs only)")
    ap.add_argument("--ab-ticks", type=int, default=13, help="ticks per block of an alternating run")
    ap.add_argument("--families", nargs="*", default=None, help="names (default: all)")
    ap.add_argument("--out", help="folder for the traces (default: a new temporary one)")
    ap.add_argument("--traces", help="analyse the traces a previous run left in this folder instead of running")
    ap.add_argument("--json", help="write the table here")
    args = ap.parse_args()
    fams = [f for f in FAMILIES if args.families is None or f.name in args.families]
    if args.traces:
        out = Path(args.traces)
        delays = json.loads((out / "delays.json").read_text()) if (out / "delays.json").exists() else {}
        fams = [f for f in fams if (out / f"{f.name}-0.trace.jsonl").exists()]
    else:
        out, delays = record(args, fams)
    ab = json.loads((out / "interleaved.json").read_text()) if (out / "interleaved.json").exists() else {}
    runs = load_runs(out)
    table = table_rows(runs, fams, delays, ab)

    print(f"# {args.model}, {args.streams} streams x {args.tokens} tokens; ms per step; traces in {out}")
    print(f"{'family':20} {'said (costliest cause, share)':50} {'ok':>3} {'reported':>9} {'idle+':>9} "
          f"{'growth':>8} {'delay':>7} {'predicted [range]':>22} {'observed [90%]':>22} {'err':>6} {'in':>3} "
          f"{'busy+':>7} {'idle-only':>9} {'err':>6} {'run pairs':>22}")
    for t in table:
        err = (t["predicted"] - 1) / (t["observed"] - 1) - 1 if t["observed"] != 1 else float("nan")
        t["gain_error"] = err
        t["idle_only_error"] = err_idle = ((t["predicted"] - 1) / (t["idle_only"] - 1) - 1
                                           if t["idle_only"] != 1 else float("nan"))
        delay = f"{t['delay']:7.2f}" if t["delay"] is not None else "      -"
        pred = f"{t['predicted']:.3f} [{t['low']:.3f}-{t['high']:.3f}]"
        obs = f"{t['observed']:.3f} [{t['observed_low']:.3f}-{t['observed_high']:.3f}]"
        t["within_25"] = abs(err) <= 0.25
        print(f"{t['family']:20} {t['said'][:50]:50} {'yes' if t['right'] else 'NO':>3} {t['reported']:9.3f} "
              f"{t['injected']:9.3f} {t['growth']:8.3f} {delay} {pred:>22} {obs:>22} {err:+6.0%} "
              f"{'yes' if t['within_25'] else 'no':>3} {t['busy_plus']:7.3f} {t['idle_only']:9.3f} {err_idle:+6.0%} "
              f"{t['runs']:.3f} [{t['runs_low']:.3f}-{t['runs_high']:.3f}]")
    pipe = runs.reports("clean")
    print(f"clean pipelined period {mean_period(pipe):.3f} ms, blocking {mean_period(runs.reports('clean_blocking')):.3f} ms")
    folder = out / "interleaved"
    switched = json.loads((folder / "switched.json").read_text()) if (folder / "switched.json").exists() else {}
    charges = charge_rows(runs, fams, ab, switched, folder)
    print_charges(charges)
    if args.json:
        Path(args.json).write_text(json.dumps({"families": table, "charges": charges}, indent=1))


if __name__ == "__main__":
    main()
