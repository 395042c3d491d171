"""Blocking vs pipelined decode on the same workload: tokens/s, step period, speedup.

Prints numbers; never fails on speed. Both modes run in one process, alternating
rounds, so machine noise hits them alike.

    python benchmarks/bench_pipeline.py --model small --streams 1 8 32
"""
from __future__ import annotations

import argparse
import statistics
import time

from photon_trace.engine.engine import Engine
from photon_trace.engine.params import SamplingParams
from photon_trace.telemetry.tracer import Tracer, now_ns


class CommitClock(Tracer):
    """Collects commit start times to measure the step period (the loop's cadence)."""
    level = 1

    def __init__(self) -> None:
        self.commits: list[int] = []

    def begin(self, phase, step, slot):
        return now_ns()

    def end(self, phase, step, slot, t0):
        if phase == 2:  # COMMIT
            self.commits.append(t0)


def workload(streams: int, tokens: int, prompt_len: int):
    prompts = [[(7 * i + j) % 250 + 1 for j in range(prompt_len)] for i in range(streams)]
    params = [SamplingParams(max_tokens=tokens, ignore_eos=True, temperature=0.0) for _ in range(streams)]
    return prompts, params


def run_once(engine: Engine, clock: CommitClock, streams: int, tokens: int, prompt_len: int):
    prompts, params = workload(streams, tokens, prompt_len)
    clock.commits.clear()
    t0 = time.perf_counter()
    outs = engine.generate(prompts, params)
    dt = time.perf_counter() - t0
    n = sum(len(o.token_ids) for o in outs)
    gaps = [b - a for a, b in zip(clock.commits, clock.commits[1:])]
    steady = gaps[len(gaps) // 5: len(gaps) - len(gaps) // 10] or gaps
    return n / dt, statistics.median(steady) / 1e6, [o.token_ids for o in outs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="small")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--tokens", type=int, default=110)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    engines = {}
    for depth in (1, 2):
        clock = CommitClock()
        engines[depth] = (Engine(model=args.model, backend=args.backend, depth=depth, max_rows=max(args.streams),
                                 max_seqs=max(args.streams) * 2, kv_tokens=max(args.streams) * 512,
                                 max_context=1024, tracer=clock), clock)
    print(f"model={args.model} backend={args.backend} tokens/stream={args.tokens} rounds={args.rounds}")
    print(f"{'streams':>7} {'T_block ms':>10} {'T_pipe ms':>10} {'block tok/s':>12} {'pipe tok/s':>11} {'speedup':>8}")
    for s in args.streams:
        res = {1: [], 2: []}
        outs = {}
        for _ in range(args.rounds):
            for depth in (1, 2):
                tps, period, toks = run_once(*engines[depth], s, args.tokens, args.prompt_len)
                res[depth].append((tps, period))
                outs[depth] = toks
        assert outs[1] == outs[2], "pipelined output differs from blocking"
        tb = statistics.median(r[0] for r in res[1])
        tp = statistics.median(r[0] for r in res[2])
        pb = statistics.median(r[1] for r in res[1])
        pp = statistics.median(r[1] for r in res[2])
        print(f"{s:>7} {pb:>10.2f} {pp:>10.2f} {tb:>12.1f} {tp:>11.1f} {tp / tb:>7.2f}x")
    for eng, _ in engines.values():
        eng.close()


if __name__ == "__main__":
    main()
