"""The ``photon-trace`` command: a thin dispatcher; each subcommand's work is a function.

    photon-trace demo        bench blocking vs pipelined, then open the dashboard on the traces
    photon-trace generate    generate text with the pipelined engine
    photon-trace bench       blocking vs pipelined at 1/8/32 streams: tables, traces, JSON summary
    photon-trace check       the CI gate on idle time and accidental syncs
    photon-trace dashboard   the timeline dashboard
    photon-trace serve       the OpenAI-compatible server
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def cmd_generate(args: argparse.Namespace) -> int:
    """Generate from one or more prompts with the pipelined engine; print text and tokens/s."""
    from photon_trace.engine.engine import Engine
    from photon_trace.engine.params import SamplingParams

    params = SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                            seed=args.seed, max_tokens=args.max_tokens)
    with Engine(model=args.model, backend=args.backend, dtype=args.dtype, depth=args.depth,
                device_threads=args.device_threads) as engine:
        t0 = time.perf_counter()
        outputs = engine.generate(args.prompts, params)
        seconds = time.perf_counter() - t0
        name = engine.device.device_name
    for prompt, out in zip(args.prompts, outputs):
        if len(args.prompts) > 1:
            print(f"--- {prompt!r} ({out.finish_reason})")
        print(prompt + out.text)
    n = sum(len(o.token_ids) for o in outputs)
    print(f"[{args.model} on {name}] {n} tokens in {seconds:.3f} s: {n / seconds:.1f} tokens/s",
          file=sys.stderr)
    return 0


def add_generate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="generate text with the pipelined engine")
    p.add_argument("prompts", nargs="+", help="one or more prompts")
    p.add_argument("--model", default="tiny", help="preset (tiny, small, 1.5b) or a Hugging Face model folder")
    p.add_argument("--max-tokens", type=int, default=64, help="new tokens per prompt at most")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None, help="sampling seed")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--dtype", default="auto", help="float32, bfloat16, float16 or auto")
    p.add_argument("--depth", type=int, default=2, choices=(1, 2), help="2 pipelined, 1 blocking")
    p.add_argument("--device-threads", type=int, default=1, help="host-process device: intra-op threads (1 = a core of its own beside the scheduler)")
    p.set_defaults(func=cmd_generate)


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: bench blocking vs pipelined, then serve the dashboard on a pair of its traces."""
    from photon_trace.bench import run_bench
    from photon_trace.dashboard.cli import run_dashboard

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


def build_parser() -> argparse.ArgumentParser:
    from photon_trace.bench import add_bench_parser
    from photon_trace.check_cli import add_check_parser
    from photon_trace.dashboard.cli import add_dashboard_parser
    from photon_trace.server import add_serve_parser

    parser = argparse.ArgumentParser(prog="photon-trace", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    add_demo(sub)
    add_generate(sub)
    add_bench_parser(sub)
    add_check_parser(sub)
    add_dashboard_parser(sub)
    add_serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
