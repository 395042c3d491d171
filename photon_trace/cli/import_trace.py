"""``photon-trace import``: a PyTorch profiler (Kineto) trace or an Nsight Systems export of any program, analysed.

Prints what the trace holds (lanes, steps, the source's clock resolution), then per
stream its busy and idle time and what caused the idle, per device its idle with all its
streams together (Nsight's view), the syncs by call site with the idle they cost, the
ranked diagnosis and, beside them, nsys analyze's expert rules under nsys's names; ``-o``
also writes it as a photon_trace file. ``check``, ``dashboard`` and the Perfetto export read
profiler traces and Nsight exports directly too.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings

from photon_trace.cli.argtypes import HelpFormatter

EXIT_OK = 0
EXIT_BAD_INPUT = 2

DESCRIPTION = """\
Analyse a PyTorch profiler trace or an Nsight Systems export of any program. Prints what the
trace holds (lanes, steps, the source's clock resolution), then per stream its busy and idle
time and what caused the idle, per device its idle with all its streams together (Nsight's
view), the syncs by call site with the idle they cost, the ranked diagnosis and, beside them,
nsys analyze's expert rules under nsys's names; -o also writes it as a photon_trace file.

check, dashboard and export perfetto read profiler traces and Nsight exports directly too."""


def add_import_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "import", help="analyse a PyTorch profiler trace or an Nsight Systems export: bubbles, causes, syncs, "
                       "diagnosis",
        description=DESCRIPTION,
        epilog="exit codes: 0 imported (also when the trace has no device activity), "
               "2 bad input (not a trace, a newer schema, truncated, invalid events, a corrupt or "
               "non-Nsight SQLite file, a .nsys-rep not yet exported)",
        formatter_class=HelpFormatter)
    p.add_argument("trace", help="the profiler's Chrome-trace JSON (.json or .json.gz), or an Nsight Systems "
                                 "export (nsys export --type sqlite: .sqlite or .sqlite.gz)")
    p.add_argument("-o", "--output", help="also write it as a photon_trace file (.trace.jsonl[.gz])")
    p.add_argument("--step-annotation", metavar="NAME",
                   help="take steps from this annotation or NVTX range (NAME or NAME#N, DOMAIN:NAME for an NVTX "
                        "domain; default ProfilerStep#N, or our engine's photon_trace domain in an Nsight report)")
    p.add_argument("--stream", help="analyse this stream (default: the one with the most ops)")
    p.add_argument("--allow-partial", action="store_true",
                   help="import what is valid of a truncated or damaged trace (with warnings) instead of failing")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.set_defaults(func=run_import)
    return p


def run_import(args: argparse.Namespace) -> int:
    from photon_trace.cli.import_summary import render_summary
    from photon_trace.telemetry.analysis import analyze, expert_rules
    from photon_trace.telemetry.trace.file import TraceFormatError, write_trace
    from photon_trace.telemetry.trace.importers import is_kineto, is_nsys
    from photon_trace.telemetry.trace.importers.kineto import import_kineto

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if is_nsys(args.trace):
                from photon_trace.telemetry.trace.importers.nsys import import_nsys
                trace = import_nsys(args.trace, step_annotation=args.step_annotation)
            elif not is_kineto(args.trace):
                from photon_trace.telemetry.trace.importers import load_any
                load_any(args.trace)   # ours (then say so below), or the reason it is neither
                print(f"photon-trace import: {args.trace} is already a photon_trace trace: check, dashboard and "
                      f"the Perfetto export read it as it is", file=sys.stderr)
                return EXIT_BAD_INPUT
            else:
                trace = import_kineto(args.trace, step_annotation=args.step_annotation, strict=not args.allow_partial)
        except TraceFormatError as e:
            print(f"photon-trace import: BAD INPUT: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    for w in caught:
        print(f"photon-trace import: warning: {w.message}", file=sys.stderr)
    streams = sorted({d.stream for d in trace.device_spans})
    if args.stream is not None and args.stream not in streams:
        print(f"photon-trace import: BAD INPUT: no stream {args.stream!r} (streams: {', '.join(streams) or 'none'})",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    report = analyze(trace, stream=args.stream) if trace.device_spans else None
    rules = expert_rules(trace)
    if args.output:
        out = write_trace(trace, args.output)
        print(f"photon-trace import: wrote {out}", file=sys.stderr)
    if args.json:
        print(json.dumps({"source": trace.header["source"], "analysis": report.to_dict() if report else None,
                          "nsys_rules": {r.name: r._asdict() for r in rules}}, indent=1, default=str))
    else:
        print(render_summary(trace, report, rules))
    return EXIT_OK
