"""What the server loop's ``serve`` span (``server/between_ticks.py``) costs each tick: the
``end`` before the tick and the ``begin`` after it, on a real tiny engine's recording tracer at
the default level (ON) with the thread's counters (schedstat where the kernel has it), against
the same loop with no span, A/B alternated round by round in one run (the machine's load drifts
alike over both) and the median of the rounds printed, with its share of a 2.6 ms step.

A tick records one serve span more (two when the engine slept: the span ends before the sleep
and begins again after it). Never fails on speed.

    python benchmarks/bench_serve_span.py [--rounds 9] [--number 20000]
"""
from __future__ import annotations

import argparse
import os
import statistics
import timeit

from photon_trace.engine.engine import Engine
from photon_trace.server.between_ticks import BetweenTicks
from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.tracer import TraceLevel

STEP_MS = 2.6   # the step the budget is stated against (issue 28: at most 1% of it)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--number", type=int, default=20000, help="ticks per round and variant")
    args = ap.parse_args()
    tracer = RecordingTracer(TraceLevel.ON, flush_interval_s=None, nvtx=False)
    engine = Engine(tracer=tracer, model="tiny", backend="cpu", max_rows=4, max_seqs=4)
    try:
        between = BetweenTicks()
        between.begin(engine)

        def with_span() -> None:       # what _serve does around a tick, less the tick itself
            between.end()
            between.begin(engine)

        def without() -> None:         # the same call overhead, no span
            pass

        span, bare = [], []
        for _ in range(args.rounds):
            span.append(timeit.timeit(with_span, number=args.number) / args.number)
            bare.append(timeit.timeit(without, number=args.number) / args.number)
            tracer.flush()            # drain the rings, as the recorder does between cycles
        between.end()
        cost = statistics.median(s - b for s, b in zip(span, bare))
        print(f"thread clock: {tracer.header['host']['thread_clock']}; load {os.getloadavg()[0]:.2f}; "
              f"{args.rounds} rounds x {args.number} ticks")
        print(f"serve span end+begin per tick: {statistics.median(span) * 1e6:.2f} us "
              f"(loop alone {statistics.median(bare) * 1e6:.2f} us); its cost, median of the rounds' "
              f"differences: {cost * 1e6:.2f} us = {cost * 1e3 / STEP_MS:.3%} of a {STEP_MS} ms step")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
