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
    p.add_argument("trace", nargs="+",
                   help="the profiler's Chrome-trace JSON (.json or .json.gz), or an Nsight Systems export (nsys "
                        "export --type sqlite: .sqlite or .sqlite.gz); a folder, or several files, holding one trace "
                        "per rank of a distributed job")
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


def is_ranks_input(paths: list[str]) -> bool:
    """A folder, or several files: one trace per rank."""
    from pathlib import Path
    return len(paths) > 1 or Path(paths[0]).is_dir()


def run_import(args: argparse.Namespace) -> int:
    """Import and print; with ``--json`` exactly one JSON object, a failure's included
    (``{"error": ..., "exit": 2}``), so a script reading stdout always gets something to parse."""
    from photon_trace.telemetry.trace.file import TraceFormatError

    paths = args.trace if isinstance(args.trace, list) else [args.trace]
    ranks = is_ranks_input(paths)
    args.trace = paths if ranks else paths[0]

    def bad(message: str) -> int:
        print(f"photon-trace import: BAD INPUT: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": message, "exit": EXIT_BAD_INPUT}))
        return EXIT_BAD_INPUT

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            trace = _read(args)
        except TraceFormatError as e:
            return bad(str(e))
        except Exception as e:   # whatever a damaged file does to a reader, the answer is one line
            return bad(f"{args.trace}: cannot read: {type(e).__name__}: {e}")
    for w in caught:
        print(f"photon-trace import: warning: {w.message}", file=sys.stderr)
    if isinstance(trace, str):
        return bad(trace)
    if not ranks:
        streams = sorted({d.stream for d in trace.device_spans})
        if args.stream is not None and args.stream not in streams:
            return bad(f"no stream {args.stream!r} (streams: {', '.join(streams) or 'none'})")
    try:
        return _report_ranks(args, trace) if ranks else _report(args, trace)
    except OSError as e:     # -o to a folder that is not there, a full disk
        return bad(f"cannot write {args.output}: {e.strerror or e}")
    except Exception as e:   # a trace read whole that still cannot be analysed: said, never a traceback
        return bad(f"{args.trace}: cannot analyse: {type(e).__name__}: {e}")


def _read(args: argparse.Namespace):
    """The trace, or a message saying why ``args.trace`` is not one to import."""
    from photon_trace.telemetry.trace.importers import is_kineto, is_nsys
    from photon_trace.telemetry.trace.importers.kineto import import_kineto

    if isinstance(args.trace, list):
        from photon_trace.telemetry.trace.importers.rank_files import load_ranks
        return load_ranks(args.trace, strict=not args.allow_partial, step_annotation=args.step_annotation)
    if is_nsys(args.trace):
        from photon_trace.telemetry.trace.importers.nsys import import_nsys
        return import_nsys(args.trace, step_annotation=args.step_annotation)
    if not is_kineto(args.trace):
        from photon_trace.telemetry.trace.importers import load_any
        load_any(args.trace)   # ours (then say so), or the reason it is neither
        return (f"{args.trace} is already a photon_trace trace: check, dashboard and the Perfetto export read "
                f"it as it is")
    return import_kineto(args.trace, step_annotation=args.step_annotation, strict=not args.allow_partial)


def _report(args: argparse.Namespace, trace) -> int:
    from photon_trace.cli.import_summary import render_summary
    from photon_trace.telemetry.analysis import analyze, expert_rules
    from photon_trace.telemetry.analysis.source_notes import source_notes
    from photon_trace.telemetry.trace.file import write_trace

    report = analyze(trace, stream=args.stream) if trace.device_spans else None
    rules = expert_rules(trace)
    if args.output:
        out = write_trace(trace, args.output)
        print(f"photon-trace import: wrote {out}", file=sys.stderr)
    if args.json:
        print(json.dumps({"source": trace.header["source"], "notes": source_notes(trace),
                          "analysis": report.to_dict() if report else None,
                          "nsys_rules": {r.name: r._asdict() for r in rules}}, indent=1, default=str))
    else:
        print(render_summary(trace, report, rules))
    return EXIT_OK


def _report_ranks(args: argparse.Namespace, trace) -> int:
    from photon_trace.cli.import_ranks import ranks_json, render_ranks
    from photon_trace.telemetry.analysis.ranks import analyze_ranks
    from photon_trace.telemetry.trace.file import write_trace

    rr = analyze_ranks(trace)
    if args.output:
        print(f"photon-trace import: wrote {write_trace(trace, args.output)}", file=sys.stderr)
    if args.json:
        print(json.dumps(ranks_json(rr), indent=1, default=str))
    else:
        print(render_ranks(trace, rr))
    return EXIT_OK
