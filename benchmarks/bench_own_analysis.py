"""``photon-trace check`` of our own trace file, stage by stage: time and resident memory.

Our own traces are bubble-bound (``docs/scale.md``, "Our own traces: four million bubbles"):
this prints, for one file of ``--spans`` spans (``tests/helpers/scale_traces.py:write_own_trace``,
cached in ``--cache``), in a fresh child process per ``--repeats``: the seconds and RSS after
``load_any``, then after ``run_check`` (``analyze`` and every gate), the peak RSS (``VmHWM``), and
the bubble-sized gaps and bubbles. ``--rev`` runs the same child from another git revision of
the package (a temporary ``git archive``), in turn with the working tree's, for an A/B in one
run on a shared machine. Prints the numbers; never fails on speed.

    python benchmarks/bench_own_analysis.py [--spans 1000000] [--repeats 3] [--rev 0382b33]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
import photon_trace
print("package", photon_trace.__file__, file=sys.stderr)
def status():
    d = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(d["VmRSS"].split()[0]) // 1024, int(d["VmHWM"].split()[0]) // 1024
from photon_trace.telemetry.trace.importers.sniff import load_any
from photon_trace.telemetry.analysis.gate import run_check
t = time.perf_counter()
trace = load_any(sys.argv[1])
load_s, (load_rss, load_hwm) = time.perf_counter() - t, status()
t = time.perf_counter()
result = run_check(trace)
check_s, (rss, hwm) = time.perf_counter() - t, status()
print(json.dumps({"load_s": load_s, "load_rss_mb": load_rss, "check_s": check_s, "rss_mb": rss, "peak_mb": hwm,
                  "bubbles": len(result.report.bubbles), "exit": result.exit_code}))
"""


def trace_file(spans: int, cache: Path) -> Path:
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]
    from helpers.scale_traces import GENERATOR_VERSION, write_own_trace
    path = cache / f"own-{spans}-v{GENERATOR_VERSION}.trace.jsonl.gz"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(".partial-" + path.name)
        write_own_trace(tmp, spans)
        tmp.rename(path)
    return path


def package_at(rev: str, into: Path) -> Path:
    """The package as it was at ``rev``, unpacked under ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "photon_trace"], check=True,
                          capture_output=True).stdout
    tar = into / "src.tar"
    tar.write_bytes(data)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into


def run(path: Path, src: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    # run from ``src``: ``-c`` puts the current directory first on the path, before PYTHONPATH
    out = subprocess.run([sys.executable, "-c", CHILD, str(path.resolve())], env=env, cwd=src, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rev", help="also run the package of this git revision, in turn")
    ap.add_argument("--cache", type=Path, default=ROOT / ".bench-cache" / "traces")
    args = ap.parse_args()
    path = trace_file(args.spans, args.cache)
    print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB; load average {os.getloadavg()[0]:.2f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    with tempfile.TemporaryDirectory() as tmp:
        sources = {"working tree": ROOT}
        if args.rev:
            sources[args.rev] = package_at(args.rev, Path(tmp))
        runs: dict[str, list[dict]] = {k: [] for k in sources}
        for _ in range(args.repeats):
            for name, src in sources.items():
                runs[name].append(run(path, src))
                r = runs[name][-1]
                print(f"  {name}: load {r['load_s']:.1f} s, {r['load_rss_mb']} MB; check {r['check_s']:.1f} s; "
                      f"peak {r['peak_mb']} MB; {r['bubbles']:,} bubbles; exit {r['exit']}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| code | load s | run_check s | RSS after load MB | peak RSS MB | bubbles |")
    print("|---|---|---|---|---|---|")
    for name, rs in runs.items():
        med = lambda k: statistics.median(r[k] for r in rs)   # noqa: E731
        print(f"| {name} | {med('load_s'):.1f} | {med('check_s'):.1f} | {med('load_rss_mb'):.0f} | "
              f"{med('peak_mb'):.0f} | {rs[0]['bubbles']:,} |")


if __name__ == "__main__":
    main()
