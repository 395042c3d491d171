"""``photon-trace dashboard``: argparse wiring and the entry point the CLI calls."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from photon_trace.cli.argtypes import HelpFormatter, port
from photon_trace.cli.preflight import listen_socket
from photon_trace.hosts import allowed_hosts, is_loopback

DEFAULT_TRACES_DIR = "traces"


def add_dashboard_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``dashboard`` on the CLI's subparsers; the handler is ``args.func``."""
    p = subparsers.add_parser(
        "dashboard", help="serve the timeline dashboard on a trace (or two, to compare)",
        description="Serve the Dash dashboard: timeline lanes, bubbles, flagged syncs, panels, "
                    "A/B compare and live mode. With no TRACE, opens the newest traces under --traces-dir. "
                    "A TRACE that does not exist or is not a trace is refused before anything is served.",
        formatter_class=HelpFormatter)
    p.add_argument("traces", nargs="*", metavar="TRACE",
                   help="trace files (the first is shown, the second offered for comparison) or folders "
                        "to pick from; their folders become openable in the page. A folder of one trace per "
                        "rank of a distributed job (each named with its rank: rank0…, rank1…) opens as the job")
    p.add_argument("--ranks", action="store_true",
                   help="the TRACE files are one distributed job's ranks: open them together, a lane group per rank")
    p.add_argument("--host", default="127.0.0.1", help="interface to serve on (default: loopback only)")
    p.add_argument("--port", type=port, default=8050, help="TCP port to serve on")
    p.add_argument("--allowed-hosts", default=None,
                   help="comma-separated Host names the page answers to (default: localhost, 127.0.0.1, ::1 "
                        "and --host): a DNS-rebinding guard")
    p.add_argument("--live", metavar="URL", default=None,
                   help="follow a running engine: the server's live URL, or a trace file being written "
                        "(a trace file, opened with the same checks as any other; its folder is not "
                        "made openable)")
    p.add_argument("--traces-dir", default=DEFAULT_TRACES_DIR,
                   help="the traces folder the file picker lists (default: traces/)")
    p.add_argument("--guide", action="store_true",
                   help="open on the first thing to fix: the top host-fixable diagnosis row's first "
                        "occurrence selected and in view (the demo's first screen)")
    p.set_defaults(func=run_dashboard)
    return p


def resolve_inputs(traces: list[str], traces_dir: str, live: str | None = None,
                   ranks: bool = False) -> tuple[list[str], list[str]]:
    """(trace files to open, folders the page may open) from the command line.

    Named files are opened in order; a named folder contributes its newest two, or itself when it
    holds one job's ranks; ``ranks``: the named files are one job; with nothing named, the newest
    two under ``traces_dir``. A ``live`` file is followed, not listed: its folder is not opened to
    the page (it may hold anything)."""
    from photon_trace.dashboard.sources.openable import job_files, job_spec
    from photon_trace.dashboard.sources.folders import newest_traces

    allowed = [Path(traces_dir)]
    files: list[Path | str] = []
    named = bool(traces)
    if ranks and traces:
        allowed += [Path(t).expanduser().parent for t in traces]
        files.append(job_spec(traces))
        traces = []
    for t in traces:
        p = Path(t).expanduser()
        if p.is_dir() and job_files(p):
            allowed.append(p)
            files.append(p.resolve())
        elif p.is_dir():
            allowed.append(p)
            files += newest_traces(p)
        else:
            allowed.append(p.parent)
            files.append(p)
    if not named:
        files = newest_traces(Path(traces_dir))
    seen: list[str] = []
    for d in allowed:
        r = str(d.resolve())
        if r not in seen:
            seen.append(r)
    return [str(f) for f in files], seen


def refuse_unopenable(traces: list[str]) -> None:
    """``ValueError`` (exit 2) for a named path that is neither a folder nor a trace the page
    would open (``dashboard/sources/openable.py``): refused here, before a port is taken or
    its folder made openable, rather than served as an error page."""
    from photon_trace.dashboard.sources.openable import NotOpenable, check_openable

    for t in traces:
        p = Path(t).expanduser()
        if p.is_dir():
            continue
        if not p.exists():
            raise ValueError(f"{t}: no such file or folder")
        try:
            check_openable(p)
        except NotOpenable as e:
            raise ValueError(f"{t}: {str(e).removeprefix(p.name + ': ')}") from None


def run_dashboard(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    from photon_trace.dashboard.app import create_app

    refuse_unopenable(args.traces)
    listen_socket(args.host, args.port).close()   # a busy port: one line now, not Flask's exit
    files, allowed = resolve_inputs(args.traces, args.traces_dir, args.live, getattr(args, "ranks", False))
    hosts = allowed_hosts(args.host, getattr(args, "allowed_hosts", None))
    if not is_loopback(args.host):
        print(f"warning: serving on {args.host}: anyone who can reach it can read the allowed folders; "
              f"it answers only to the Host names {', '.join(sorted(hosts))} (--allowed-hosts)", file=sys.stderr)
    if not files and not args.live:
        print(f"no traces found under {args.traces_dir}/; the page will offer a path box", file=sys.stderr)
    app = create_app(files, allowed, args.live, guide=getattr(args, "guide", False), allowed_hosts=hosts)
    print(f"photon_trace dashboard on http://{args.host}:{args.port}/  ({len(files)} trace(s), "
          f"allowed: {', '.join(allowed)})", file=sys.stderr)
    app.run(host=args.host, port=args.port, debug=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m photon_trace.dashboard``: the same command without the top-level CLI."""
    parser = argparse.ArgumentParser(prog="photon-trace")
    sub = parser.add_subparsers(dest="command", required=True)
    add_dashboard_parser(sub)
    args = parser.parse_args(["dashboard", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)
