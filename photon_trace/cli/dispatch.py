"""The ``photon-trace`` command: a thin dispatcher; each subcommand's work is a function.

    photon-trace demo        bench blocking vs pipelined and the mask-upload bug, then the dashboard on the bug
    photon-trace generate    generate text with the pipelined engine
    photon-trace bench       blocking vs pipelined at 1/8/32 streams: tables, traces, JSON summary
    photon-trace check       the CI gate on idle time and accidental syncs
    photon-trace import      analyse a PyTorch profiler trace or an Nsight Systems export of any program
    photon-trace export      write a trace for another tool (export perfetto: ui.perfetto.dev)
    photon-trace dashboard   the timeline dashboard
    photon-trace serve       the OpenAI-compatible server

Exit status: what the subcommand returns; a user error (bad path, unsupported
architecture, bad checkpoint, bad value) prints one line and exits 2, a runtime
failure (the device died) one line and exits 1. ``--debug`` shows the traceback.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from photon_trace.cli.argtypes import HelpFormatter

DESCRIPTION = """\
Record, analyse and explain where an LLM inference engine leaves the device idle: run the
engine, check a trace in CI, open a trace (ours, a PyTorch profiler trace or an Nsight Systems
export) in the dashboard or in Perfetto, serve a model over an OpenAI-compatible API."""

EPILOG = """\
exit status: what the command returns (each command's --help says); a mistake you can fix
(a bad path, value or model) prints one line and exits 2, a failure at run time (the device
died) one line and exits 1; --debug shows the traceback as well.
Start with: photon-trace demo"""


# Each subcommand's module and the function that adds its parser, in the order --help lists them.
# A module is imported only when its parser is built: ``serve`` pulls in the web server, ``bench``
# the engine, and ``photon-trace check`` of a small trace should not pay for them (they were
# 0.06 s of the 0.11 s it took on a 28-event profile, byte-compiled).
COMMANDS = {
    "demo": ("photon_trace.cli.demo", "add_demo"),
    "generate": ("photon_trace.cli.generate", "add_generate"),
    "bench": ("photon_trace.cli.bench", "add_bench_parser"),
    "check": ("photon_trace.cli.check", "add_check_parser"),
    "import": ("photon_trace.cli.import_trace", "add_import_parser"),
    "export": ("photon_trace.cli.export", "add_export_parser"),
    "dashboard": ("photon_trace.cli.dashboard", "add_dashboard_parser"),
    "serve": ("photon_trace.cli.serve", "add_serve_parser"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line's parser; with ``command`` (one of ``COMMANDS``), only that
    subcommand's parser under it, which parses that subcommand's arguments the same way."""
    from importlib import import_module

    parser = argparse.ArgumentParser(prog="photon-trace", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=HelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in [command] if command in COMMANDS else COMMANDS:
        module, add = COMMANDS[name]
        getattr(import_module(module), add)(sub)
    for p in _parsers(sub):   # also after the subcommand; SUPPRESS keeps a --debug given before it
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks of errors")
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names, when nothing but ``--debug`` comes before it; else None
    (``--help``, a mistake: the whole parser answers, listing every subcommand)."""
    for arg in argv:
        if arg != "--debug":
            return arg if arg in COMMANDS else None
    return None


def _parsers(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """Every subcommand's parser, nested ones (``export perfetto``) included."""
    found = []
    for p in sub.choices.values():
        found.append(p)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += _parsers(action)
    return found


def user_errors() -> tuple[type[BaseException], ...]:
    """What a user can fix: exit 2 and one line. Everything else is a runtime failure (exit 1)."""
    from photon_trace.engine.model.checkpoint import CheckpointError

    return ValueError, CheckpointError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(command_of(argv)).parse_args(argv)   # a bad flag: argparse's usage line and exit 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if getattr(args, "debug", False):
            raise
        user = isinstance(e, user_errors())
        kind = "error" if user else f"failed ({type(e).__name__})"
        message = " ".join(str(e).split()) or type(e).__name__   # one line, whatever the message held
        if not user:
            message = message.split(" Traceback ")[0]   # a worker's traceback stays behind --debug
        print(f"photon-trace {args.command}: {kind}: {message}", file=sys.stderr)
        return 2 if user else 1


if __name__ == "__main__":
    sys.exit(main())
