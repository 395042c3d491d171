"""``photon-trace export perfetto TRACE [OUT]``: a trace as Chrome/Perfetto trace-event JSON.

Host threads, device streams, the bubbles track (with their causes) and the accidental syncs'
instants, and each device's idle with all its streams together, for ui.perfetto.dev
(``telemetry/export/perfetto.py``). TRACE is a photon_trace file, a PyTorch profiler trace or an
Nsight Systems export; OUT defaults to TRACE's name up to its first dot, plus
``.perfetto.json`` (``.json.gz`` writes gzip).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from photon_trace.cli.argtypes import HelpFormatter

EXIT_OK = 0
EXIT_BAD_INPUT = 2

PERFETTO = """\
Write TRACE as Chrome/Perfetto trace-event JSON, to open in ui.perfetto.dev: host threads,
device streams, a track of bubbles (device idle, with their causes), the accidental syncs as
instants, and each device's idle with all its streams together.

TRACE is a photon_trace trace, a PyTorch profiler trace or an Nsight Systems export. OUT is
where to write; without it, beside TRACE: its name up to the first dot, plus .perfetto.json
(an OUT ending in .json.gz is written gzipped)."""


def add_export_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("export", help="write a trace in another tool's format (perfetto)",
                              description="Write a trace in another tool's format.", formatter_class=HelpFormatter)
    formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
    perfetto = formats.add_parser(
        "perfetto", help="Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev)",
        description=PERFETTO, formatter_class=HelpFormatter,
        epilog="exit codes: 0 written, 2 bad input (not a trace, unreadable)")
    perfetto.add_argument("trace", help="a photon_trace trace (.trace.jsonl[.gz]), a PyTorch profiler trace or an "
                                        "Nsight Systems export (.sqlite[.gz])")
    perfetto.add_argument("out", nargs="?", help="where to write (default: beside TRACE, NAME.perfetto.json)")
    perfetto.set_defaults(func=run_export_perfetto)
    return p


def run_export_perfetto(args: argparse.Namespace) -> int:
    """Load TRACE, write OUT, print OUT's path; a file that is not a trace: one line on stderr, exit 2."""
    from photon_trace.telemetry.export.perfetto import write_chrome_trace
    from photon_trace.telemetry.trace.file import TraceFormatError
    from photon_trace.telemetry.trace.importers import load_any

    src = Path(args.trace)
    out = Path(args.out) if args.out else src.with_name(src.name.split(".")[0] + ".perfetto.json")
    if not src.exists():
        hint = " (for help: photon-trace export perfetto --help)" if args.trace[:1] == "-" else ""
        print(f"error: {src}: no such file{hint}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        trace = load_any(src)
    except TraceFormatError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    write_chrome_trace(trace, out)
    print(out)
    return EXIT_OK
