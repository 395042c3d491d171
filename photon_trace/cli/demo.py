"""``photon-trace demo``: the main job. Bench blocking vs pipelined, then open the dashboard
on a pair of the bench's traces."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: bench blocking vs pipelined, then serve the dashboard on a pair of its traces."""
    from photon_trace.cli.bench import run_bench
    from photon_trace.cli.dashboard import run_dashboard
    from photon_trace.cli.main import build_parser

    parser = build_parser()
    bench = ["bench", "--model", args.model, "--backend", args.backend, "--out", args.out,
             "--streams", *map(str, args.streams), "--repeats", str(args.repeats)]
    rc = run_bench(parser.parse_args(bench))
    if rc != 0 or args.no_serve:
        return rc
    middle = sorted(args.streams)[len(args.streams) // 2]
    pair = [_newest(Path(args.out), f"*-s{middle}-{mode}-r1.trace.jsonl") for mode in ("pipelined", "blocking")]
    dash = ["dashboard", *[str(p) for p in pair if p], "--host", args.host, "--port", str(args.port)]
    print(f"\nopening the {middle}-stream pipelined and blocking traces in the dashboard", file=sys.stderr)
    return run_dashboard(parser.parse_args(dash))


def _newest(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="bench blocking vs pipelined, then serve the dashboard on the traces")
    p.add_argument("--model", default="small", help="preset (tiny, small, 1.5b) or a model folder")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--streams", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--repeats", type=int, default=3, help="measured runs per mode and stream count (medians over them are reported: one run is noisy here)")
    p.add_argument("--out", default="traces/runs", help="where the bench writes its traces")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050)
    p.add_argument("--no-serve", action="store_true", help="bench only; do not start the dashboard")
    p.set_defaults(func=cmd_demo)
