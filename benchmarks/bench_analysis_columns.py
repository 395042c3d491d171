"""The analysis and the gate over a profiler trace held as columns: time, scaling and memory.

For each ``--steps`` (2000 steps of 100 kernels: ~1M Kineto events, ~626k records), a child
process builds the training-loop trace of tests/helpers/kineto_builder.py, imports it
(``load_any``) and turns its host and device spans into ``Columns``, as the streaming importer
hands them over (each size in its own process: the import's memory is gone before the next).
One more child times ``run_check`` on them all (``analyze`` and every gate, as ``photon-trace
check`` runs them; median of ``--repeats``, the sizes in turn in each round so that the shared
machine's drifting load weighs on each alike), then one more run of each under ``tracemalloc``
for the analysis's peak of Python allocations (numpy's arrays included). Also printed: how many
gaps are bubble-sized, the per-bubble Python work that remains (``docs/scale.md``). The timing
child holds every size at once: for sizes of several million events, give one ``--steps``.
Prints the numbers; never fails on speed.

    python benchmarks/bench_analysis_columns.py [--steps 2000 4000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

KERNELS_PER_STEP = 100


def prepare(steps: int, out: Path) -> None:
    """Child: the profiler trace of ``steps`` steps, imported, its spans as columns, pickled to ``out``."""
    from helpers.kineto_builder import training_trace
    from photon_trace.telemetry.trace.columns import Columns
    from photon_trace.telemetry.trace.importers import load_any
    from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan

    path = out.with_suffix(".json")
    builder = training_trace(steps, kernels_per_step=KERNELS_PER_STEP)
    events = len(builder.events)
    builder.write(path)
    del builder
    trace = load_any(path)
    path.unlink()
    trace.host_spans = Columns.from_records(HostSpan, trace.host_spans)
    trace.device_spans = Columns.from_records(DeviceSpan, trace.device_spans)
    trace.header["bench_events"] = events
    with out.open("wb") as f:
        pickle.dump(trace, f, protocol=5)


def measure(paths: list[Path], repeats: int) -> list[dict]:
    """Child: ``run_check`` on each pickled trace, the sizes taken in turn in each round (a load
    that drifts over the run weighs on all alike), then once each under tracemalloc."""
    import numpy as np

    from photon_trace.telemetry.analysis.bubbles import MIN_BUBBLE_NS, device_gaps
    from photon_trace.telemetry.analysis.gate import run_check

    traces = []
    for path in paths:
        with path.open("rb") as f:
            traces.append(pickle.load(f))
    times: list[list[float]] = [[] for _ in traces]
    results = [None] * len(traces)
    for _ in range(repeats):
        for i, trace in enumerate(traces):
            t0 = time.perf_counter()
            results[i] = run_check(trace)
            times[i].append(time.perf_counter() - t0)
    rows = []
    for trace, result, took in zip(traces, results, times):
        tracemalloc.start()
        run_check(trace)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        gaps = device_gaps(trace, result.report.window)
        rows.append(dict(events=trace.header["bench_events"],
                         records=len(trace.host_spans) + len(trace.device_spans) + len(trace.waits),
                         seconds=statistics.median(took), times=took, peak_mb=peak / 2**20,
                         columns_mb=(trace.host_spans.nbytes() + trace.device_spans.nbytes()) / 2**20,
                         gaps=len(gaps), bubble_gaps=int(np.count_nonzero(gaps.full_ns >= MIN_BUBBLE_NS)),
                         bubbles=len(result.report.bubbles), exit_code=result.exit_code))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[2000, 4000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        what, *rest = args.child
        if what == "prepare":
            prepare(int(rest[0]), Path(rest[1]))
        else:
            print(json.dumps(measure([Path(p) for p in rest[1:]], int(rest[0]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for steps in args.steps:
            paths.append(Path(tmp) / f"trace{steps}.pickle")
            t0 = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--child", "prepare", str(steps), str(paths[-1])], check=True)
            print(f"{steps} steps: built, imported and held as columns in {time.perf_counter() - t0:.0f} s")
        out = subprocess.run([sys.executable, __file__, "--child", "measure", str(args.repeats), *map(str, paths)],
                             check=True, capture_output=True, text=True).stdout
    rows = json.loads(out.strip().splitlines()[-1])
    for steps, row in zip(args.steps, rows):
        print(f"{steps} steps: {row['events']:,} events, {row['records']:,} records (columns {row['columns_mb']:.0f} MB)")
        print(f"  analysis + gate (run_check): median {row['seconds']:.2f} s of "
              f"{', '.join(f'{t:.2f}' for t in row['times'])}; "
              f"{row['seconds'] / row['events'] * 1e6:.2f} s per million events")
        print(f"  tracemalloc peak during run_check: {row['peak_mb']:.0f} MB")
        print(f"  compute-stream gaps: {row['gaps']:,}, bubble-sized: {row['bubble_gaps']:,}; "
              f"bubbles in the report: {row['bubbles']:,}; exit code {row['exit_code']}")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(f"scaling {a['events']:,} -> {b['events']:,} events (x{b['events'] / a['events']:.2f}): "
              f"time x{b['seconds'] / a['seconds']:.2f}, tracemalloc peak x{b['peak_mb'] / a['peak_mb']:.2f}")


if __name__ == "__main__":
    main()
