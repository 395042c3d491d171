"""The Perfetto export of a long trace: time and peak memory, in a fresh process.

A synthetic pipelined run with the mask-upload bug (tests/helpers/loop_sim.py drives the
real recorder) of about ``--spans`` spans is written to a trace file; then, in a child
process so the peak memory is the export's own, the file is loaded and exported with
``photon-trace export perfetto`` (events written one by one, bubbles and
sync instants included). Printed: seconds, peak RSS, output size. Numbers are never judged.

    .venv/bin/python benchmarks/bench_perfetto_export.py --spans 500000
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

CHILD = """import resource, sys, time
from photon_trace.cli import main
t = time.perf_counter()
rc = main(["export", "perfetto", sys.argv[1], sys.argv[2]])
print(f"{time.perf_counter() - t:.2f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {rc}")
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args(argv)
    from bench_dashboard import make_trace
    folder = Path(tempfile.gettempdir()) / "photon-trace-bench-dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    src = make_trace(args.spans, folder)
    out = folder / "export.json"
    print(f"trace {src.name}: {src.stat().st_size / 1e6:.0f} MB")
    for r in range(args.rounds):
        res = subprocess.run([sys.executable, "-c", CHILD, str(src), str(out)], capture_output=True, text=True)
        secs, rss, rc = res.stdout.split()[-3:]
        print(f"round {r + 1}: load + analyse + export {secs} s, peak RSS {rss} MB, exit {rc}, "
              f"output {out.stat().st_size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
