#!/usr/bin/env python3
"""Our device clock against CUPTI's: one pipelined run, traced by us and by torch.profiler.

    python3 scripts/cupti_clock_check.py OUT_DIR [--model 1.5b] [--backend cuda|cpu] [--streams 8] [--tokens 48]

Builds a pipelined engine, prepares the workload (draft run, then the measured
schedule replayed: no graph capture inside the profiled run), then runs it traced
under ``torch.profiler`` (CUDA activities: CUPTI's kernel, memcpy and memset
records) and compares, per step, each forward's start and end and every bubble of
at least 20 us of our event-based compute-stream spans with CUPTI's records of
the same steps (``photon_trace.telemetry.analysis.clock``). Writes into OUT_DIR:
``clock.trace.jsonl`` (our trace), ``clock_cupti.json.gz`` (CUPTI's activities:
start and end in unix ns, stream, kind), ``clock_check.json`` (the comparison), and
prints the verdict. Needs no nvtx, OpenTelemetry, Dash or xgrammar.

Exit status: 0 when the clocks agree, or there is nothing to compare (no CUDA: the
host-process device's work runs in another process, which torch.profiler does not
see), or the data cannot decide (the profiled forward over 10% slower than the same
run's unprofiled one, traced first into ``clock.unprofiled.trace.jsonl``); 1 when they
disagree; 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout, not installed


def realtime_minus_monotonic_ns() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC (Kineto stamps unix time; we stamp monotonic), median of a few."""
    return round(statistics.median(time.time_ns() - time.monotonic_ns() for _ in range(9)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", default="1.5b")
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=48)
    args = ap.parse_args(argv)
    if args.streams < 1 or args.tokens < 2:
        print("cupti_clock_check: --streams must be >= 1 and --tokens >= 2", file=sys.stderr)
        return 2

    import torch
    from torch.profiler import ProfilerActivity, profile

    from photon_trace.engine.engine import Engine
    from photon_trace.telemetry.analysis.clock import compare_with_cupti, kineto_activities
    from photon_trace.traced_run import trace_run
    from photon_trace.workload import Workload, engine_settings, prepare

    args.out.mkdir(parents=True, exist_ok=True)
    wl = Workload(streams=args.streams, tokens=args.tokens, seed=11)
    cuda = args.backend == "cuda" and torch.cuda.is_available()
    if args.backend == "cuda" and not cuda:
        print("cupti_clock_check: --backend cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    t_start = time.monotonic()
    with Engine(model=args.model, backend=args.backend, dtype=args.dtype, depth=2, **engine_settings(wl)) as eng:
        prepared = prepare(eng, wl)
        print(f"engine built and warmed up in {time.monotonic() - t_start:.1f} s on {eng.device.device_name}",
              flush=True)
        reference = None
        if cuda:   # the same run without the profiler first: its forward is what a profiled one is held to
            plain, _ = trace_run(eng, prepared, args.out / "clock.unprofiled.trace.jsonl", analyse=False)
            decode = [d.t1 - d.t0 for d in plain.device_spans if d.stream == "compute" and d.op == "forward"]
            reference = round(statistics.median(decode)) if decode else None
        offset = realtime_minus_monotonic_ns()
        activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
        with profile(activities=activities) as prof:
            trace, summary = trace_run(eng, prepared, args.out / "clock.trace.jsonl", analyse=False)
        offset = (offset + realtime_minus_monotonic_ns()) // 2
    with tempfile.TemporaryDirectory() as tmp:
        chrome_path = os.path.join(tmp, "kineto.json")
        prof.export_chrome_trace(chrome_path)
        with open(chrome_path, encoding="utf-8") as f:
            acts = kineto_activities(json.load(f))
    with gzip.open(args.out / "clock_cupti.json.gz", "wt", encoding="utf-8") as f:
        json.dump([a._asdict() for a in acts], f)
    res = compare_with_cupti(trace, acts, realtime_minus_monotonic_ns=offset, reference_forward_ns=reference)
    if not cuda:
        res.skipped = (f"backend {args.backend}: the device's work runs in another process, which "
                       "torch.profiler does not see (CUPTI needs CUDA)")
    result = {**res.to_dict(), "steps": summary["steps"], "header_clock": trace.header.get("clock", {}),
              "backend": args.backend, "model": args.model, "activities": len(acts)}
    (args.out / "clock_check.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{summary['steps']} steps traced; {len(acts)} CUPTI activities; "
          f"our header's clock: {trace.header.get('clock', {})}")
    print("\n".join(res.lines()))
    return 0 if res.ok or res.skipped or res.undecided else 1


if __name__ == "__main__":
    sys.exit(main())
