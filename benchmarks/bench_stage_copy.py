"""What staging a step's inputs costs the device: the ``stage`` device op, host -> device.

Runs the standard workload traced on the host-process device (``tiny`` preset, so
steps are short and staging is a visible share) at 1, 8 and 32 streams and prints,
per stream count, the median and 90th percentile of the ``stage`` op (the worker's
copies from the slot's shared-memory staging into its device buffers) over the
steady-state window, beside the median decode period. Never fails on speed.

    python benchmarks/bench_stage_copy.py [--model tiny] [--streams 1 8 32] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from photon_trace.engine.engine import Engine
from photon_trace.telemetry.analysis import analyze
from photon_trace.traced_run import trace_run
from photon_trace.workload import Workload, engine_settings, prepare


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench-stage-"))
    print(f"model {args.model}, host-process device; stage op in us (steady-state window), period in ms")
    print(f"{'streams':>7} {'round':>5} {'stage p50':>9} {'stage p90':>9} {'steps':>6} {'period':>7}")
    for s in args.streams:
        wl = Workload(streams=s, tokens=args.tokens, seed=3)
        with Engine(model=args.model, backend="cpu", **engine_settings(wl)) as eng:
            prepared = prepare(eng, wl)
            medians = []
            for r in range(args.rounds):
                trace, _ = trace_run(eng, prepared, out / f"s{s}-r{r}.trace.jsonl", analyse=False)
                rep = analyze(trace)
                w0, w1 = rep.window
                stage = [(d.t1 - d.t0) / 1e3 for d in trace.device_spans if d.op == "stage" and w0 <= d.t0 < w1]
                medians.append(statistics.median(stage))
                print(f"{s:>7} {r + 1:>5} {medians[-1]:>9.1f} {_quantile(stage, 0.9):>9.1f} "
                      f"{len(stage):>6} {rep.period_ms:>7.3f}")
            print(f"{s:>7} {'all':>5} {statistics.median(medians):>9.1f}   (median of the rounds' medians)")


if __name__ == "__main__":
    main()
