"""The ``photon-trace`` command: a thin dispatcher; each subcommand's work is a function.

    photon-trace demo        bench blocking vs pipelined and the mask-upload bug, then the dashboard on the bug
    photon-trace generate    generate text with the pipelined engine
    photon-trace bench       blocking vs pipelined at 1/8/32 streams: tables, traces, JSON summary
    photon-trace check       the CI gate on idle time and accidental syncs
    photon-trace dashboard   the timeline dashboard
    photon-trace serve       the OpenAI-compatible server
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from photon_trace.cli.bench import add_bench_parser
    from photon_trace.cli.check import add_check_parser
    from photon_trace.cli.dashboard import add_dashboard_parser
    from photon_trace.cli.demo import add_demo
    from photon_trace.cli.generate import add_generate
    from photon_trace.cli.serve import add_serve_parser

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
