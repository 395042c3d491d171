"""``photon-trace check``: the CI gate on the command line (the gates are in ``telemetry/analysis/gate.py``).

Checks a trace file, or with ``--run`` first makes one: a short pipelined run of
the standard workload on the CPU backend (``tiny`` preset by default). Prints the verdict
(on stdout for a pass, stderr for a fail), then on stdout each gate's figures (on a pass too)
and the steady state's.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from photon_trace.cli.argtypes import HelpFormatter, at_least, fraction, non_negative, positive_int
from photon_trace.cli.preflight import refuse_gpu_only_on_cpu
from photon_trace.telemetry.analysis.gate import (
    DEFAULT_MAX_IDLE_FRACTION, DEFAULT_TOLERANCE, EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, one_line, run_check)

DESCRIPTION = """\
Check a trace in CI: fail when the device sits idle too much in the steady state, when the host
made an accidental sync (a wait on the device it did not mean), or, against a baseline trace,
when idle per step or the step period grew. The trace is a file (ours, a PyTorch profiler trace
or an Nsight Systems export), or with --run a short pipelined run made here on the CPU.

Idle is measured over the steady-state window (warm-up and drain cut off), as the dashboard
shows it; syncs are counted over the whole trace, since one in warm-up is still a bug, and the
output gives the window's count beside it."""

EXIT_CODES = f"""\
exit codes:
  {EXIT_PASS}  every gate passed
  {EXIT_FAIL}  a gate failed: idle fraction over --max-idle, an accidental sync anywhere in
     the trace, or (with --baseline) idle per step or the median period regressed by more
     than --tolerance of the baseline's period
  {EXIT_BAD_INPUT}  bad input: no trace given, or a trace/baseline that is unreadable, foreign,
     corrupt, holds impossible times, is truncated or stopped early (a full disk; unless
     --allow-partial) or has nothing to analyse (also argparse's usage errors)

with --baseline, a growth is a regression only when its 95% interval (from each run's own
per-step variability) excludes no change too. When the device's own time per op moved
between the two runs (beyond 10%, interval excluding no change: the machine changed) or
either run's engine thread waited for a CPU over half of it (too busy), the regression
gates cannot decide: they pass, and the verdict line says "cannot decide against the
baseline" and why. That is exit 0 (the other gates still count), or --undecided-exit CODE
for a CI that wants to tell it apart (e.g. 3, to rerun on a quieter machine)."""


def add_check_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "check", help="CI gate: fail on device idle time, accidental syncs or regressions",
        description=DESCRIPTION, epilog=EXIT_CODES, formatter_class=HelpFormatter)
    p.add_argument("trace", nargs="*",
                   help="trace file to check: ours, a PyTorch profiler trace (.json[.gz]) or an Nsight Systems "
                        "export (.sqlite[.gz]); a folder, or several files, of one trace per rank of a distributed "
                        "job: every rank is gated (omit with --run)")
    p.add_argument("--run", action="store_true",
                   help="run a short pipelined CPU workload and check its trace")
    p.add_argument("--model", default="tiny", help="--run: preset or checkpoint folder (on the CPU)")
    # 32 streams: the tiny forward is then long enough that the host-process device's own
    # command pickup (tens of µs per op) stays well under the default idle limit
    p.add_argument("--streams", type=positive_int, default=32, help="--run: concurrent streams")
    p.add_argument("--tokens", type=at_least(2), default=48, help="--run: mean generated tokens per request")
    p.add_argument("--out", default="traces", help="--run: folder for the trace")
    p.add_argument("--baseline", help="trace file to compare against")
    p.add_argument("--undecided-exit", type=int, default=EXIT_PASS, metavar="CODE",
                   help="with --baseline: the exit code when every gate passed but the regression gates could not "
                        "decide (the machine changed between the runs, or was too busy); default 0")
    p.add_argument("--max-idle", type=fraction, default=DEFAULT_MAX_IDLE_FRACTION, metavar="FRACTION",
                   help="largest steady-state idle fraction of the compute stream, 0 to 1 (0.05 is 5%%)")
    p.add_argument("--tolerance", type=non_negative, default=DEFAULT_TOLERANCE, metavar="FRACTION",
                   help="with --baseline: allowed growth of idle per step and of the period, as a fraction of "
                        "the baseline's period (0.1 is 10%%)")
    p.add_argument("--allow-sync", action="append", default=[], metavar="PATTERN",
                   help="a call-site pattern (fnmatch, e.g. '*aten::item*') whose syncs the program means: "
                        "listed, not failing the gate (repeatable)")
    p.add_argument("--step-annotation", metavar="NAME",
                   help="profiler traces and Nsight exports: take steps from this annotation or NVTX range "
                        "(NAME, NAME#N or DOMAIN:NAME; default ProfilerStep#N)")
    p.add_argument("--allow-partial", "--allow-truncated", dest="allow_partial", action="store_true",
                   help="check what is valid of a truncated or damaged trace (our file without its end line "
                        "or cut inside a line, a damaged profiler trace) instead of exit 2")
    p.add_argument("--markdown", metavar="PATH", help="write a Markdown summary here")
    p.add_argument("--junit", metavar="PATH",
                   help="write a JUnit XML report here: a suite named after the trace, a test case per gate, "
                        "with times")
    p.set_defaults(func=run_check_cli)
    return p


def run_check_cli(args: argparse.Namespace) -> int:
    traces = args.trace if isinstance(args.trace, list) else ([] if args.trace is None else [args.trace])
    if (not traces) == (not args.run):
        print("photon-trace check: give a trace file or --run (not both)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if traces and (len(traces) > 1 or Path(traces[0]).is_dir()):
        from photon_trace.telemetry.analysis.gate_ranks import run_check_ranks
        if args.baseline:
            print("photon-trace check: BAD INPUT: --baseline compares one trace with another; a job's ranks are "
                  "checked without one", file=sys.stderr)
            return EXIT_BAD_INPUT
        return _gate(lambda: run_check_ranks(
            traces, max_idle_fraction=args.max_idle, tolerance=args.tolerance, out_md=args.markdown,
            out_junit=args.junit, allow_syncs=tuple(args.allow_sync), allow_partial=args.allow_partial,
            step_annotation=args.step_annotation))
    trace = traces[0] if traces else None
    if args.run:
        refuse_gpu_only_on_cpu(args.model, "cpu", cpu_because="check --run runs on the CPU")
        trace = short_run(args.model, args.streams, args.tokens, Path(args.out))
        print(f"photon-trace check: ran {args.streams} pipelined streams on {args.model} -> {trace}",
              file=sys.stderr)
    return _gate(lambda: run_check(
        trace, args.baseline, max_idle_fraction=args.max_idle, tolerance=args.tolerance, out_md=args.markdown,
        out_junit=args.junit, allow_syncs=tuple(args.allow_sync), allow_partial=args.allow_partial,
        step_annotation=args.step_annotation), undecided_exit=getattr(args, "undecided_exit", EXIT_PASS))


def _gate(check, undecided_exit: int = EXIT_PASS) -> int:
    """Run ``check`` (one trace's gate or a job's), print its verdict, notes and warnings; its exit
    code (``undecided_exit`` for a pass whose regression gates could not decide)."""
    with warnings.catch_warnings(record=True) as caught:   # said below, one line each
        warnings.simplefilter("always")
        result = check()
    print(result.summary(), file=sys.stdout if result.passed else sys.stderr)
    for line in result.details():   # the figures, on a pass too: the command's output, not a diagnostic
        print(f"  {line}", flush=True)
    for note in result.notes:
        print(f"  note: {one_line(note)}", file=sys.stderr)
    for w in caught:
        print(f"  warning: {one_line(str(w.message))}", file=sys.stderr)
    if result.passed and getattr(result, "undecided", ""):
        print(f"  warning: cannot decide against the baseline: {one_line(result.undecided)}", file=sys.stderr)
        return undecided_exit
    return result.exit_code


def short_run(model: str, streams: int, tokens: int, out: Path) -> Path:
    """A short traced pipelined run of the standard workload on the CPU backend; its trace path."""
    from photon_trace.telemetry.trace.file import default_trace_path
    from photon_trace.traced_run import run_traced
    from photon_trace.workload import Workload

    path = default_trace_path(out, stem=f"check-{Path(model).name}-s{streams}")
    run_traced(dict(model=model, backend="cpu", depth=2), Workload(streams=streams, tokens=tokens), path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="photon-trace")
    add_check_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
