"""The mask-upload bug, measured: constrained requests in blocking mode, pipelined with the
asynchronous mask upload, and pipelined with ``mask_upload="sync"`` (pageable memory and a
blocking copy: the host stalls until the device drains), at 1, 8 and 32 streams.

Three engines, one workload (every request constrained), the modes interleaved round by round
in one process; prints tokens/s of each, the ratios to blocking and the share of the
pipelining gain the sync upload loses. Never fails on speed.

    python benchmarks/bench_mask_upload.py [--model tiny] [--constrained point|json_schema] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics

from photon_trace.engine.engine import Engine
from photon_trace.workload import Workload, drive, engine_settings, prepare, warm_up

MODES = (("blocking", dict(depth=1, mask_upload="async")),
         ("pipelined async", dict(depth=2, mask_upload="async")),
         ("pipelined sync", dict(depth=2, mask_upload="sync")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--constrained", default="point", choices=("point", "json_schema"))
    ap.add_argument("--tokens", type=int, default=60, help="mean tokens per request (point: its max_count follows)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    workloads = {s: Workload(streams=s, tokens=args.tokens, constrained=args.constrained, constrained_share=1.0)
                 for s in args.streams}
    sizing = engine_settings(workloads[max(args.streams)])
    engines = {name: Engine(model=args.model, backend=args.backend, **sizing, **kw) for name, kw in MODES}
    print(f"model={args.model} backend={args.backend} constrained={args.constrained} (every request), "
          f"rounds={args.rounds}")
    print(f"{'streams':>7} {'blocking':>10} {'pipe async':>11} {'pipe sync':>10} {'async/blk':>10} "
          f"{'sync/blk':>9} {'gain lost':>10}   (tokens/s)")
    try:
        for s in args.streams:
            prepared = prepare(engines["pipelined async"], workloads[s])
            for name in ("blocking", "pipelined sync"):
                warm_up(engines[name], prepared)  # the measured schedule, once untraced
            tps: dict[str, list[float]] = {name: [] for name, _ in MODES}
            digests = set()
            for r in range(args.rounds):
                order = [name for name, _ in MODES]
                order = order[r % 3:] + order[:r % 3]
                for name in order:
                    run = drive(engines[name], prepared.requests)
                    tps[name].append(run.generated / run.wall_s)
                    digests.add(run.digest())
            b, a, y = (statistics.median(tps[n]) for n, _ in MODES)
            lost = (a - y) / (a - b) if a > b else float("nan")
            print(f"{s:>7} {b:>10.1f} {a:>11.1f} {y:>10.1f} {a / b:>9.3f}x {y / b:>8.3f}x {lost:>9.0%}"
                  + ("" if len(digests) == 1 else "   OUTPUTS DIFFER"))
    finally:
        for eng in engines.values():
            eng.close()


if __name__ == "__main__":
    main()
