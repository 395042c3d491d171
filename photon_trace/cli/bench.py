"""``photon-trace bench``: blocking against pipelined on identical workloads, traced.

For each stream count the same prepared workload (prompts, seeds, lengths, stop
tokens: see ``photon_trace.workload``) runs in blocking (depth 1) and pipelined
(depth 2) mode on two engines built once. Per stream count, the pipelined engine
first runs the draft workload (which resolves the stop tokens), then each engine
replays the measured schedule once untraced, so every CUDA graph bucket a measured
run uses is captured before measurement; the measured runs then alternate modes,
swapping which goes first each round, so machine noise hits both alike.

It prints the source's two tables: per mode, the steady-state medians of
forward, sample and period; per stream count, T_block, T_pipe, L, z and the cost
model's predicted speedup beside the observed one (end-to-end tokens/s); then the
pipelining gain with its 95% interval, and a warning where the two modes' device
times differ beyond noise (``bench_gain.py``). Every
run's trace goes under ``--out`` with a JSON summary (``bench_summary.json``, or ``--summary``).
Numbers are printed, never judged: a benchmark does not fail on speed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from photon_trace.cli.argtypes import HelpFormatter, at_least, positive_int
from photon_trace.cli.bench_equality import NEAR_TIE_ULPS, ReferenceScores, compare_runs
from photon_trace.cli.bench_gain import gain_of, render_gains
from photon_trace.cli.preflight import refuse_gpu_only_on_cpu
from photon_trace.traced_run import trace_run
from photon_trace.workload import DEFAULT_TOKENS, Workload, engine_settings, prepare, warm_up

MODES = ((1, "blocking"), (2, "pipelined"))
SUMMARY = "bench_summary.json"

DESCRIPTION = """\
Blocking (depth 1) against pipelined (depth 2) on identical workloads, traced. For each stream
count both engines run the same prepared requests (prompts, seeds, lengths, stop tokens), after
an untraced warm-up replay; the measured runs alternate modes so machine noise hits both alike.

Prints, per mode, the steady-state medians of forward, sample and period, and per stream count
the cost model's predicted speedup beside the observed one, then the pipelining gain with its 95%
interval; it warns where the two modes' device times differ beyond noise (the machine changed
between them) or the machine kept a run's engine thread off the CPU most of the run. Every
run's trace and a JSON summary go under --out. Numbers are printed, never judged: a slow run does not fail the bench."""


def add_bench_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bench", help="blocking vs pipelined on identical workloads, traced; the cost model against measurement",
        description=DESCRIPTION, formatter_class=HelpFormatter,
        epilog=("Example: photon-trace bench --model small --streams 1 8 32\n"
                "Exit status: 0 when every run completed (speed never fails it), "
                "1 when pipelined and blocking outputs differ (in fp32 on the CPU at all; elsewhere "
                "by more than a near-tie, see --near-tie-ulps), 2 on bad arguments."))
    p.add_argument("--model", default="small",
                   help="preset (tiny, small, 1.5b), a checkpoint folder or a Hub id (owner/name)")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"),
                   help="cuda, cpu (the host-process device) or auto (cuda when there is a GPU)")
    p.add_argument("--dtype", default="auto", help="float32, bfloat16, float16 (fp32, bf16, fp16) or auto")
    p.add_argument("--streams", type=positive_int, nargs="+", default=[1, 8, 32],
                   help="concurrent streams, one row of the tables each")
    p.add_argument("--tokens", type=at_least(2), default=DEFAULT_TOKENS, help="mean generated tokens per request")
    p.add_argument("--requests-per-stream", type=positive_int, default=1,
                   help="requests each stream sends, one after another")
    p.add_argument("--prompt-len", type=positive_int, default=32, help="mean prompt length (characters)")
    p.add_argument("--mask-upload", default="async", choices=("async", "sync"),
                   help="sync: the mask-upload bug (a pageable copy that waits for the device), in both modes")
    p.add_argument("--constrained", nargs="?", const="point", default=None, choices=("point", "json_schema"),
                   help="half the requests constrained (default kind: point)")
    p.add_argument("--repeats", type=positive_int, default=1, help="measured runs per mode and stream count")
    p.add_argument("--seed", type=at_least(0), default=0, help="workload seed (also the engines' seed)")
    p.add_argument("--cuda-graphs", default="on", choices=("on", "off"),
                   help="CUDA: capture decode forwards as CUDA graphs")
    p.add_argument("--device-threads", type=positive_int, default=1,
                   help="host-process device: intra-op threads (1 = a core of its own beside the scheduler)")
    p.add_argument("--sync-debug", action="store_true",
                   help="CUDA: record torch's sync-debug warnings as accidental syncs")
    p.add_argument("--near-tie-ulps", type=at_least(0), default=NEAR_TIE_ULPS,
                   help="bf16/fp16/CUDA: a divergence between modes whose two tokens score within this many "
                        "units in the last place of the top score is a near-tie (reported, not a failure)")
    p.add_argument("--trace-level", default="on", choices=("on", "full"),
                   help="full also records the sub-phases (stage, mask build and upload, stream-out) and "
                        "per-row detail")
    p.add_argument("--torch-profiler", action="store_true",
                   help="also record each run with torch.profiler (*.pt.trace.json.gz next to our trace) and "
                        "check it against ours: the same steps, and on CUDA the device op times (the profiler "
                        "slows the host: read the numbers from a run without it)")
    p.add_argument("--out", default="traces/runs", help="folder for the traces and the JSON summary")
    p.add_argument("--summary", default=SUMMARY, metavar="NAME",
                   help="the JSON summary's file name in --out (the demo gives each of its benches its own)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_bench)
    return p


def run_bench(args: argparse.Namespace) -> int:
    from photon_trace.engine.engine import Engine
    from photon_trace.telemetry.analysis import analyze, cost_model
    from photon_trace.telemetry.tracer import TraceLevel

    refuse_gpu_only_on_cpu(args.model, args.backend)   # before any engine is built
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    level = TraceLevel.FULL if args.trace_level == "full" else TraceLevel.ON
    workloads = {s: Workload(streams=s, tokens=args.tokens, requests_per_stream=args.requests_per_stream,
                             prompt_len=args.prompt_len, constrained=args.constrained, seed=args.seed)
                 for s in args.streams}
    sizing = engine_settings(workloads[max(args.streams)])
    # Both engines get the workload's seed: every request carries its own seed anyway, and equal
    # engine settings are what make the two traces one workload to the dashboard's cost model.
    common = dict(model=args.model, backend=args.backend, dtype=args.dtype, mask_upload=args.mask_upload,
                  cuda_graphs=args.cuda_graphs == "on", device_threads=args.device_threads, seed=args.seed,
                  **sizing)
    tag = _tag(args)
    bar = _progress(args, total=len(args.streams) * (2 + 2 * args.repeats))
    engines = {}
    rows: list[dict[str, Any]] = []
    equalities = []
    started = time.time()
    try:
        for depth, mode in MODES:
            bar.set_description(f"building the {mode} engine")
            engines[mode] = Engine(depth=depth, **common)
        device = engines["pipelined"].device
        for s in args.streams:
            wl = workloads[s]
            bar.set_description(f"{s} streams: warm-up")
            prepared = prepare(engines["pipelined"], wl)   # stop tokens resolved, then a warm-up replay
            bar.update()
            warm_up(engines["blocking"], prepared)   # blocking batches differ (no zombies): its own replay
            bar.update()
            reports: dict[str, list] = {"blocking": [], "pipelined": []}
            runs: dict[str, list] = {"blocking": [], "pipelined": []}
            outputs: dict[str, dict] = {}
            for r in range(args.repeats):
                order = ("blocking", "pipelined") if r % 2 == 0 else ("pipelined", "blocking")
                for mode in order:
                    bar.set_description(f"{s} streams: {mode} {r + 1}/{args.repeats}")
                    path = out / f"{tag}-s{s}-{mode}-r{r + 1}.trace.jsonl"
                    profiler = path.with_name(path.name.replace(".trace.jsonl", ".pt.trace.json.gz"))
                    trace, summary = trace_run(engines[mode], prepared, path, level, analyse=False,
                                               header={"bench": {"repeat": r + 1, "tag": tag}},
                                               sync_debug=args.sync_debug, keep_outputs=True,
                                               torch_profiler=profiler if args.torch_profiler else None)
                    outputs[f"{mode} r{r + 1}"] = summary.pop("outputs")
                    if args.torch_profiler:
                        summary["torch_profiler"] = _profiler_check(trace, profiler)
                    report = analyze(trace)
                    summary["analysis"] = report.to_dict(tables=False)
                    summary["host_run"] = trace.header.get("host_run")   # what the OS did with the engine thread
                    reports[mode].append(report)
                    runs[mode].append(summary)
                    bar.update()
            eq = _equality(engines["pipelined"], prepared, outputs, args.near_tie_ulps)
            equalities.append(eq)
            rows.append({**_row(s, prepared, reports, runs, cost_model), "outputs_identical": eq.identical == eq.requests,
                         "equality": eq.to_dict(), "gain": gain_of(reports, runs)})
    finally:
        bar.close()
        for eng in engines.values():
            eng.close()
    summary = {
        "command": "photon-trace bench", "args": {k: v for k, v in vars(args).items() if k != "func"},
        "tag": tag, "commit": os.environ.get("PHOTON_TRACE_COMMIT"),
        "started_wall": started, "seconds": time.time() - started,
        "model": args.model, "backend": device.backend, "device": device.device_name,
        "settings": {**common, "tokens": args.tokens, "requests_per_stream": args.requests_per_stream,
                     "constrained": args.constrained, "repeats": args.repeats, "streams": args.streams,
                     "seed": args.seed, "trace_level": args.trace_level},
        "rows": rows,
    }
    path = out / args.summary
    path.write_text(json.dumps(summary, indent=1, default=_jsonable) + "\n", encoding="utf-8")
    print(render_tables(summary))
    if args.torch_profiler:
        print(_render_profiler_checks(rows))
    print(f"\ntraces and summary: {out}/ ({tag}-*.trace.jsonl, {path.name})")
    failed = [r["streams"] for r, eq in zip(rows, equalities) if not eq.ok]
    if failed:
        print(f"photon-trace bench: pipelined and blocking outputs differ at {failed} streams"
              + ("" if equalities[0].exact else " by more than near-ties"), file=sys.stderr)
        return 1
    return 0


def _equality(engine, prepared, outputs: dict[str, dict], ulps: int):
    """Blocking against pipelined tokens over every measured run of one row (see bench_equality)."""
    dtype = engine.config.resolved_dtype()
    exact = dtype == "float32" and engine.device.backend == "cpu"
    runs = {name: o["tokens"] for name, o in sorted(outputs.items())}   # "blocking r1" first: the reference
    first = next(iter(outputs.values()))
    differ = len({str(t) for t in runs.values()}) > 1
    scores = ReferenceScores(engine) if differ else None
    return compare_runs(runs, first["prompts"], [r.params for r in prepared.requests], exact=exact, dtype=dtype,
                        scores=scores, ulps=ulps)


def _profiler_check(trace, profiler: Path) -> dict[str, Any]:
    """torch.profiler's trace of the run, imported, against ours (``trace.importers.crosscheck``)."""
    from photon_trace.telemetry.recording.profiler_ranges import STEP_ANNOTATION
    from photon_trace.telemetry.trace.importers.crosscheck import check_against_profiler
    from photon_trace.telemetry.trace.importers.kineto import import_kineto

    check = check_against_profiler(trace, import_kineto(profiler, step_annotation=STEP_ANNOTATION))
    return {"trace": str(profiler), **check._asdict()}


def _render_profiler_checks(rows: list[dict[str, Any]]) -> str:
    checks = [run["torch_profiler"] for row in rows for mode in ("blocking", "pipelined")
              for run in row["runs"][mode] if "torch_profiler" in run]
    same = sum(c["same_steps"] for c in checks)
    out = [f"\ntorch.profiler: {len(checks)} runs recorded (*.pt.trace.json.gz beside each trace); importing them "
           f"finds the same steps in {same} of {len(checks)} (clock offset spread per run "
           f"{min(c['host_spread_ns'] for c in checks) / 1e3:.1f}-{max(c['host_spread_ns'] for c in checks) / 1e3:.1f} µs)"]
    on_device = [c for c in checks if c["device_steps"]]
    if on_device:
        out.append(f"device op times, ours (CUDA events on the host clock) vs the profiler's (CUPTI): median "
                   f"|difference| {statistics.median(c['device_residual_ns'] for c in on_device) / 1e3:.1f} µs, worst "
                   f"{max(c['device_residual_max_ns'] for c in on_device) / 1e3:.1f} µs over "
                   f"{sum(c['device_steps'] for c in on_device)} steps")
    else:
        out.append("no device activity in the profiler's traces (the host-process device runs in another process)")
    return "\n".join(out)


def _tag(args: argparse.Namespace) -> str:
    model = Path(args.model).name if "/" in args.model else args.model
    parts = ["bench", model, args.mask_upload]
    if args.constrained:
        parts.append(args.constrained)
    return "-".join(parts)


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _row(streams, prepared, reports, runs, cost_model) -> dict[str, Any]:
    """One stream count: per-mode medians over the repeats, and the cost model per repeat pair."""
    per_mode = {}
    for mode, reps in reports.items():
        per_mode[mode] = {
            "forward_ms": _median(r.forward_ms for r in reps),
            "sample_ms": _median(r.sample_ms for r in reps),
            "period_ms": _median(r.period_ms for r in reps),
            "bookkeeping_ms": _median(r.bookkeeping_ms for r in reps),
            "idle_fraction": _median(r.idle_fraction for r in reps),
            "host_idle_fraction": _median(r.host_idle_fraction for r in reps),
            "bookkeeping_share": _median(r.bookkeeping_ms / r.period_ms if r.period_ms else 0.0 for r in reps),
            "e2e_tokens_per_s": _median(r.e2e_tokens_per_s for r in reps),
            "tokens_per_s": _median(r.tokens_per_s for r in reps),
            "accidental_syncs": _median(sum(s.count for s in r.syncs) for r in reps),
            "traces": [x["trace"] for x in runs[mode]],
        }
    # T = each mode's mean step period over the steady-state window (warm-up and drain
    # excluded), predicted = T_block / T_pipe x (1 - z), against the observed end-to-end
    # speedup. Also kept: median periods, and run-mean periods, which are nearly an identity
    # (end-to-end tokens/s is tokens over steps x mean period) and serve as a consistency check.
    pairs = list(zip(reports["blocking"], reports["pipelined"]))
    models = [cost_model(b, p, period="steady") for b, p in pairs]
    medians = [cost_model(b, p, period="median") for b, p in pairs]
    run_mean = [cost_model(b, p) for b, p in pairs]
    return {
        "streams": streams, "planned_stops": prepared.planned_stops(),
        "finish_reasons": runs["pipelined"][0]["finish_reasons"],
        "modes": per_mode,
        "cost_model": {
            "T_block_ms": _median(m.T_block for m in models), "T_pipe_ms": _median(m.T_pipe for m in models),
            "L": _median(m.L for m in models), "z": _median(m.z for m in models),
            "predicted": _median(m.predicted for m in models), "observed": _median(m.observed for m in models),
            "error_pts": _median(m.error_pts for m in models),
            "predicted_median_periods": _median(m.predicted for m in medians),
            "error_pts_median_periods": _median(m.error_pts for m in medians),
            "predicted_run_mean": _median(m.predicted for m in run_mean),
            "error_pts_run_mean": _median(m.error_pts for m in run_mean),
            "observed_steady": _median(m.observed_steady for m in models),
            # the spread a reader needs on a noisy machine: how often pipelining won a pair
            "pipelined_wins": sum(m.observed > 1.0 for m in models), "pairs": len(models),
            "observed_min": min(m.observed for m in models), "observed_max": max(m.observed for m in models),
            "per_repeat": [m.to_dict() for m in models],
        },
        "runs": runs,
    }


def render_tables(summary: dict[str, Any]) -> str:
    """The two tables, as plain text."""
    s = summary["settings"]
    out = [f"photon-trace bench: model={summary['model']} backend={summary['backend']} "
           f"device={summary['device']!r}",
           f"  tokens/request ~{s['tokens']}, mask upload {s['mask_upload']}, "
           f"constrained {s['constrained'] or 'no'}, repeats {s['repeats']}, "
           f"{summary['seconds']:.0f} s in all", "",
           "Per mode: steady-state medians over decode steps (ms); share = bookkeeping / period; idle of the",
           "compute stream, and its part before the next op was enqueued (host: the rest is launch latency)",
           f"{'streams':>7}  {'mode':<9} {'forward':>8} {'sample':>7} {'period':>7} {'bookkeep':>8} "
           f"{'(share)':>7} {'idle':>6} {'host':>6} {'syncs':>5} {'tok/s e2e':>10}"]
    for row in summary["rows"]:
        for mode in ("blocking", "pipelined"):
            m = row["modes"][mode]
            out.append(f"{row['streams']:>7}  {mode:<9} {m['forward_ms']:>8.3f} {m['sample_ms']:>7.3f} "
                       f"{m['period_ms']:>7.3f} {m['bookkeeping_ms']:>8.3f} {m.get('bookkeeping_share', 0):>7.1%} "
                       f"{m['idle_fraction']:>6.1%} {m.get('host_idle_fraction', 0):>6.1%} "
                       f"{m['accidental_syncs']:>5.0f} {m['e2e_tokens_per_s']:>10.1f}")
    out += ["", "Per row: predicted = T_block / T_pipe x (1 - z) (T: mean step period in the steady-state "
            "window); observed = end-to-end tokens/s ratio;",
            "each column is its own median over the repeat pairs (so predicted need not equal the T columns' ratio);",
            "then the observed range over the pairs and in how many pairs pipelined won",
            f"{'streams':>7} {'T_block':>8} {'T_pipe':>8} {'L':>6} {'z':>6} {'predicted':>9} "
            f"{'observed':>8} {'error':>7}   {'pred(median T)':>14} {'error':>7}   {'observed range':>15} {'wins':>5}"]
    for row in summary["rows"]:
        c = row["cost_model"]
        out.append(f"{row['streams']:>7} {c['T_block_ms']:>8.3f} {c['T_pipe_ms']:>8.3f} {c['L']:>6.1f} "
                   f"{c['z']:>6.3f} {c['predicted']:>8.3f}x {c['observed']:>7.3f}x {c['error_pts']:>+6.1f}p"
                   f"   {c['predicted_median_periods']:>13.3f}x {c['error_pts_median_periods']:>+6.1f}p"
                   f"   {c['observed_min']:>6.3f}-{c['observed_max']:.3f}x {c['pipelined_wins']:>2}/{c['pairs']}"
                   + ("" if row["outputs_identical"] else "   outputs differ by near-ties"
                      if row.get("equality", {}).get("ok") else "   OUTPUTS DIFFER"))
    out += render_gains(summary["rows"])
    out += ["", "Outputs, blocking against pipelined over every run (per row):"]
    for row in summary["rows"]:
        if "equality" in row:
            out.append(f"{row['streams']:>7}  {_equality_line(row['equality'])}")
    return "\n".join(out)


def _equality_line(eq: dict) -> str:
    rule = "exact (fp32 on the CPU)" if eq["exact"] else f"near-ties allowed ({eq['dtype']})"
    line = f"identical {eq['identical']}/{eq['requests']} ({eq['share']:.1%}), {rule}"
    divs = eq["divergences"]
    parts = [f"req {d['request']} ({d['run']}) at token {d['position']}: "
             + (f"margin {d['margin']:.4g} vs {d['threshold']:.3g}" if d["margin"] is not None else "margin n/a")
             + (" near-tie" if d["near_tie"] else " NOT a near-tie")
             + (f" (the reference's own best leads both by {lead:.3g})"
                if (lead := d.get("reference_lead")) is not None and lead > d["threshold"] else "")
             for d in divs[:4]]
    return line + (": " + "; ".join(parts) + (f", +{len(divs) - 4} more" if len(divs) > 4 else "") if parts else "")


def _progress(args: argparse.Namespace, total: int):
    """A tqdm bar on stderr (a no-op stand-in when disabled or tqdm is missing)."""
    if not args.no_progress:
        try:
            from tqdm import tqdm
            return tqdm(total=total, file=sys.stderr, unit="run", dynamic_ncols=True)
        except ImportError:
            pass
    return _NoBar()


class _NoBar:
    def set_description(self, *_): pass
    def update(self, *_): pass
    def close(self): pass


def _jsonable(x):
    if isinstance(x, float) and x != x:
        return None
    return str(x)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="photon-trace")
    add_bench_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
