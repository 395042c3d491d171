"""``photon-trace import``: a PyTorch profiler (Kineto) trace of any program, analysed.

Prints what the trace holds (lanes, steps, the source's clock resolution), then per
stream its busy and idle time and what caused the idle, the syncs by call site with the
idle they cost, and the ranked diagnosis; ``-o`` also writes it as a photon_trace file.
``check``, ``dashboard`` and the Perfetto export read profiler traces directly too.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings

EXIT_OK = 0
EXIT_BAD_INPUT = 2


def add_import_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "import", help="analyse a PyTorch profiler (Kineto) trace: bubbles, causes, syncs, diagnosis",
        description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[1],
        epilog="exit codes: 0 imported (also when the trace has no device activity), "
               "2 bad input (not a trace, a newer schema, truncated, invalid events)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", help="the profiler's Chrome-trace JSON (.json or .json.gz)")
    p.add_argument("-o", "--output", help="also write it as a photon_trace file (.trace.jsonl[.gz])")
    p.add_argument("--step-annotation", metavar="NAME",
                   help="take steps from this annotation (NAME or NAME#N; default ProfilerStep#N)")
    p.add_argument("--stream", help="analyse this stream (default: the one with the most ops)")
    p.add_argument("--allow-partial", action="store_true",
                   help="import what is valid of a truncated or damaged trace (with warnings) instead of failing")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.set_defaults(func=run_import)
    return p


def run_import(args: argparse.Namespace) -> int:
    from photon_trace.telemetry.analysis import analyze
    from photon_trace.telemetry.trace.file import TraceFormatError, write_trace
    from photon_trace.telemetry.trace.importers import is_kineto
    from photon_trace.telemetry.trace.importers.kineto import import_kineto

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if not is_kineto(args.trace):
                from photon_trace.telemetry.trace.importers import load_any
                load_any(args.trace)   # ours (then say so below), or the reason it is neither
                print(f"photon-trace import: {args.trace} is already a photon_trace trace: check, dashboard and "
                      f"the Perfetto export read it as it is", file=sys.stderr)
                return EXIT_BAD_INPUT
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
    if args.output:
        out = write_trace(trace, args.output)
        print(f"photon-trace import: wrote {out}", file=sys.stderr)
    if args.json:
        print(json.dumps({"source": trace.header["source"], "analysis": report.to_dict() if report else None},
                         indent=1, default=str))
    else:
        print(render_summary(trace, report))
    return EXIT_OK


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _short(name: str, n: int = 70) -> str:
    return name if len(name) <= n else name[:n - 1] + "…"


def render_summary(trace, report) -> str:
    """The console summary of an imported trace and its analysis (``report`` None: no device activity)."""
    src = trace.header["source"]
    threads = sorted({h.thread for h in trace.host_spans})
    res = "1 ns" if src["resolution_ns"] == 1 else f"{src['resolution_ns'] / 1000:g} µs"
    out = [f"{src['file']}: {src['events']:,} events (Kineto schema {src['schema_version']}, clock resolution {res})",
           f"  host: {len(trace.host_spans):,} spans on {len(threads)} thread(s); "
           f"{len(trace.waits)} host wait(s) on the device",
           f"  steps: {trace.header['settings']['steps_found']} '{trace.header['settings']['step_annotation']}' "
           f"annotation(s)" + ("" if trace.header["settings"]["steps_found"] else " (none: the whole trace is one window)")]
    if report is None:
        out.append("  no device activity: no kernel, memcpy or memset in the trace (recorded without "
                   "ProfilerActivity.CUDA, or where there was no GPU); nothing to analyse on a device")
        return "\n".join(out)
    out.append(f"  device: {len(trace.device_spans):,} ops on {len(report.streams)} stream(s); "
               f"analysed: {report.stream}")
    out += ["", "per stream (each over its own span in the window; idle by cause, ms):",
            f"  {'stream':<18} {'ops':>6} {'span':>12} {'busy':>12} {'idle':>12} {'idle%':>6} "
            f"{'host late':>11} {'covered':>11}  causes"]
    for s in report.streams:
        causes = ", ".join(f"{k} {v / 1e6:.3f}" for k, v in sorted(s.causes.items(), key=lambda kv: -kv[1]))
        out.append(f"  {s.stream:<18} {s.ops:>6} {s.span_ns / 1e6:>12.3f} {s.busy_ns / 1e6:>12.3f} "
                   f"{s.idle_ns / 1e6:>12.3f} {s.idle_fraction:>6.1%} {s.host_idle_ns / 1e6:>11.3f} "
                   f"{s.covered_ns / 1e6:>11.3f}  {causes}")
    out += ["", f"{report.stream}: window {_ms(report.window_ns)}, idle {report.idle_fraction:.1%} "
                f"({len(report.bubbles)} bubbles, {_ms(report.bubble_ns)}; host late {_ms(report.host_idle_ns)}, "
                f"launch latency {_ms(report.launch_idle_ns)})"]
    if report.steps:
        out.append(f"  steps in the window: {len(report.steps)}, median period {report.period_ms:.3f} ms, "
                   f"median idle {sorted(s.idle_ns for s in report.steps)[len(report.steps) // 2] / 1e6:.3f} ms")
    if report.syncs:
        out += ["", "syncs by call site (host waited / device idle it cost):"]
        out += [f"  {s.count:>4} x {_short(s.site, 60)}: {_ms(s.wait_ns)} / {_ms(s.idle_ns)}  ({_short(s.reason, 80)})"
                for s in report.syncs]
    if report.diagnosis:
        out += ["", "diagnosis (what to fix first):"]
        for d in report.diagnosis[:8]:
            out.append(f"  {d.cause:<16} {_short(d.site_or_phase, 60):<60} {_ms(d.idle_ns):>12} "
                       f"{d.share:>6.1%}  -> {d.predicted_speedup:.3f}x")
    covered = sum(b.covered_ns for b in report.bubbles)
    if covered:
        out.append(f"\n  {_ms(covered)} of {report.stream}'s bubble time had another stream busy "
                   f"(the device as a whole was not idle then)")
    return "\n".join(out)
