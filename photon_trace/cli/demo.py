"""``photon-trace demo``: the tool's story on real runs, then the dashboard on its punchline.

1. blocking against pipelined on ``tiny``, where the host's bookkeeping is a visible share
   of each step, so the bubble pipelining removes is plain (the bench's two tables);
2. the mask-upload bug (``--mask-upload sync``) beside the fixed, asynchronous upload, on
   constrained requests (the same tables for each);
3. the dashboard opened on the buggy run with a guided first view (the flagged sync
   selected, its bubble and call site shown, the diagnosis row highlighted) and the fixed
   run offered as B for the Compare tab.

Each bench writes its own JSON summary in ``--out`` (``SUMMARIES``), beside its traces. After
the benches the story is told in numbers, each speed with its interval, or the reason the
machine was too busy to tell (``demo_story.py``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from photon_trace.cli.argtypes import HelpFormatter, at_least, port, positive_int
from photon_trace.cli.preflight import listen_socket, refuse_gpu_only_on_cpu

DESCRIPTION = """\
The tool's story on real runs, then the dashboard on its punchline:

1. blocking against pipelined, on a model small enough (tiny, by default) that the host's
   bookkeeping is a visible share of each step, so the bubble pipelining removes is plain;
2. the mask-upload bug (--mask-upload sync) on constrained requests;
3. the same requests with the upload fixed (asynchronous);
then the dashboard on the buggy run with a guided first view (the flagged sync selected, its
bubble and call site shown, the diagnosis row highlighted) and the fixed run as B to compare.

Each bench prints its tables; then the story is told in numbers, each speed with its 95%
interval, or why the machine was too busy to tell (the device's time moved between the runs,
or a run's engine thread waited for a CPU most of it; the load average). Each bench writes
its traces and its own JSON summary under --out:
"""

# One summary per bench, so that the three runs do not overwrite one file
SUMMARIES = ("demo-1-pipelining.summary.json", "demo-2-mask-upload-sync.summary.json",
             "demo-3-mask-upload-async.summary.json")

STORY = """
The dashboard opens on the mask-upload bug: the accidental sync the tool flagged is selected
(its call site and the device idle it caused below the timeline, the link to its bubble drawn),
and the 'What to fix first' row is highlighted. Compare tab: B is the same run with the upload
fixed. Keys: W/S zoom, A/D pan; click anything for its details. The blocking/pipelined traces
are in the trace picker."""


def cmd_demo(args: argparse.Namespace) -> int:
    """Bench the three pairs, then serve the dashboard on the buggy run with the fixed one as B."""
    from photon_trace.cli.bench import run_bench
    from photon_trace.cli.dashboard import run_dashboard

    refuse_gpu_only_on_cpu(args.model, args.backend)   # said now, not after minutes of benches
    if not args.no_serve:   # so is a busy port
        listen_socket(args.host, args.port).close()
    parser = _steps_parser()
    out = Path(args.out)
    common = ["--model", args.model, "--backend", args.backend, "--repeats", str(args.repeats),
              "--tokens", str(args.tokens), "--out", str(out)] + (["--no-progress"] if args.no_progress else [])
    runs = [("1/3 blocking vs pipelined: the bubble pipelining removes",
             ["--streams", *map(str, args.streams)]),
            ("2/3 the mask-upload bug: constrained requests, mask uploaded synchronously",
             ["--streams", str(args.mask_streams), "--constrained", "point", "--mask-upload", "sync"]),
            ("3/3 the fix: the same requests, mask uploaded asynchronously",
             ["--streams", str(args.mask_streams), "--constrained", "point", "--mask-upload", "async"])]
    for (title, extra), summary in zip(runs, SUMMARIES):
        print(f"\n== {title} ==", file=sys.stderr)
        rc = run_bench(parser.parse_args(["bench", *common, *extra, "--summary", summary]))
        if rc != 0:
            return rc
    from photon_trace.cli.demo_story import story_lines
    print("\n".join(story_lines(out, SUMMARIES)), flush=True)
    if args.no_serve:
        return 0
    pair = demo_pair(out, args.model, args.mask_streams)
    if pair is None:
        print("photon-trace demo: the bench wrote no mask-upload traces to open", file=sys.stderr)
        return 1
    print(STORY, file=sys.stderr)
    dash = ["dashboard", *map(str, pair), "--guide", "--host", args.host, "--port", str(args.port)]
    return run_dashboard(parser.parse_args(dash))


def _steps_parser() -> argparse.ArgumentParser:
    """The two subcommands the demo runs, parsed as ``photon-trace`` parses them. Built here,
    not taken from the dispatcher, which imports this module to add ``demo``."""
    from photon_trace.cli.bench import add_bench_parser
    from photon_trace.cli.dashboard import add_dashboard_parser

    parser = argparse.ArgumentParser(prog="photon-trace")
    sub = parser.add_subparsers(dest="command", required=True)
    add_bench_parser(sub)
    add_dashboard_parser(sub)
    return parser


def demo_pair(out: Path, model: str, streams: int) -> tuple[Path, Path] | None:
    """The newest pipelined traces of the buggy and the fixed upload, in that order."""
    name = Path(model).name if "/" in model else model
    found = [_newest(out, f"bench-{name}-{upload}-point-s{streams}-pipelined-r*.trace.jsonl")
             for upload in ("sync", "async")]
    return (found[0], found[1]) if all(found) else None


def _newest(folder: Path, pattern: str) -> Path | None:
    found = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="bench blocking vs pipelined and the mask-upload bug on tiny, then the "
                                    "dashboard on the bug with a guided first view",
                       description=DESCRIPTION + "\n".join(f"  {name}" for name in SUMMARIES),
                       formatter_class=HelpFormatter)
    p.add_argument("--model", default="tiny", help="preset (tiny, small, 1.5b) or a model folder (default: tiny, "
                   "where the host's share of a step, hence the bubble, is largest)")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"),
                   help="cuda, cpu (the host-process device) or auto (cuda when there is a GPU)")
    p.add_argument("--streams", type=positive_int, nargs="+", default=[1, 8],
                   help="stream counts of the blocking/pipelined bench")
    p.add_argument("--mask-streams", type=positive_int, default=8, help="streams of the mask-upload pair")
    p.add_argument("--tokens", type=at_least(2), default=110, help="mean generated tokens per request")
    p.add_argument("--repeats", type=positive_int, default=2,
                   help="measured runs per mode and stream count (medians are reported: one run is noisy here)")
    p.add_argument("--out", default="traces/runs", help="where the benches write their traces")
    p.add_argument("--host", default="127.0.0.1", help="interface the dashboard serves on (loopback only)")
    p.add_argument("--port", type=port, default=8050, help="the dashboard's TCP port")
    p.add_argument("--no-serve", action="store_true", help="bench only; do not start the dashboard")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_demo)
