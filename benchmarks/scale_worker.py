"""One measurement of ``bench_scale.py``, in a process of its own so that its peak RSS is its own.

    python benchmarks/scale_worker.py STAGE TRACE OUT.json

Stages (each starts from the file, as a user's command does):

* ``import``: ``load_any`` (reading and importing);
* ``analysis``: ``load_any`` then ``analyze``;
* ``gate``: ``photon-trace check TRACE``, the CLI's own path (loading, checking, analysing, the
  gates, the printed verdict; its output is discarded, its exit code kept); ``gate-cold`` the
  same with our lazily loaded modules imported inside the clock (below);
* ``dashboard``: the server side of the dashboard's timeline in the page's order: ``load_any``,
  the steady-state window and ``prepare_spans``, the first view as the page gets it (the figure
  with its pan margin and the overview strip, as JSON), one zoom (a view of 1% of the whole
  range, around its middle: its figure as JSON); then what follows the first view: ``analyze``
  and the bubbles added to the timeline (``with_analysis``); ``dashboard-open`` stops before them;
* ``fit:MB``: ``gate`` with the process's address space limited to MB (``RLIMIT_AS``): a
  trace too large for the memory it may use should be refused up front (exit 2, saying so);
  ``fit:MB:told`` also tells the program that budget (``PHOTON_TRACE_MEMORY_BUDGET``, the
  override of the memory check a deployment can set; code without the check ignores it);
* ``hta``: Holistic Trace Analysis's parse and ``get_idle_time_breakdown`` (run with the
  interpreter of HTA's own virtual environment: nothing of photon_trace is imported; the trace
  must be alone in its folder, since HTA reads every trace in the folder it is given).

Writes ``{"seconds": {part: s}, "info": {...}}`` to OUT.json; the parent reads the peak RSS
from the process's own resource usage when it exits. Times exclude the interpreter's start
and the imports of each tool's own code and libraries, which a long-running dashboard or
notebook pays once, whichever call first needs them.

What is imported before the clock starts, the same for both tools: all of each tool's code for
the measured path. HTA's entry point ``hta.trace_analysis`` imports all of HTA (and pandas and
numpy; its parse and breakdown then import nothing of HTA's). Ours imports lazily, so every
module of our trace and analysis layers and the check command is imported first
(``_our_code``; ``msgspec`` and ``sqlite3`` come with them), for every stage. What either
tool's calls import after that (ours: ``locale``, through argparse's messages) is timed.
``gate-cold``: the ``gate`` stage with only our entry points imported (``analyze``,
``load_any`` and the command line's ``dispatch``), so the modules the check loads lazily are
timed too: what a single ``photon-trace check`` process pays. Both run from bytecode (``bench_scale.py`` compiles ours first, as installing
does; pip compiled HTA's).
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from pathlib import Path


def _timed(seconds: dict, name: str, fn):
    t0 = time.perf_counter()
    out = fn()
    seconds[name] = time.perf_counter() - t0
    return out


def _our_code() -> None:
    """Every module of our trace and analysis layers, and the check command: the counterpart of
    ``hta.trace_analysis``, which imports all of HTA."""
    import importlib
    import pkgutil

    import photon_trace.telemetry.analysis as analysis
    import photon_trace.telemetry.trace as trace
    for pkg in (analysis, trace):
        for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            importlib.import_module(mod.name)
    importlib.import_module("photon_trace.cli.check")


def _ours(stage: str, path: Path) -> tuple[dict, dict]:
    from photon_trace.telemetry.analysis import analyze
    from photon_trace.telemetry.trace.importers import load_any

    seconds: dict[str, float] = {}
    info: dict = {}
    if stage.endswith("-cold"):
        stage = stage.removesuffix("-cold")
    else:
        _our_code()
    if stage == "gate":
        from photon_trace.cli.dispatch import main
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            info["exit_code"] = _timed(seconds, "gate", lambda: main(["check", str(path)]))
        info["verdict"] = sink.getvalue().strip().splitlines()[0][:400] if sink.getvalue().strip() else ""
        return seconds, info
    if stage in ("dashboard", "dashboard-open"):
        return _dashboard(path, analyse=stage == "dashboard")
    trace = _timed(seconds, "import", lambda: load_any(path))
    info["spans"] = len(trace.host_spans) + len(trace.device_spans)
    if stage == "import":
        return seconds, info
    report = _timed(seconds, "analysis", lambda: analyze(trace))
    info["steps"] = len(report.steps)
    if stage == "analysis":
        return seconds, info
    raise SystemExit(f"unknown stage {stage!r}")


def _dashboard(path: Path, analyse: bool) -> tuple[dict, dict]:
    """The page's own order (``dashboard/sources/store.py:TraceStore.build``): the file, the
    window and the spans, drawn; then (``analyse``) the analysis and its bubbles, which the first
    view does not wait for."""
    from photon_trace.dashboard.sources.store import outside_bubbles
    from photon_trace.dashboard.timeline.data import prepare_spans, with_analysis
    from photon_trace.dashboard.timeline.figure import timeline_figure
    from photon_trace.dashboard.timeline.overview import overview_figure
    from photon_trace.dashboard.timeline.view import View
    from photon_trace.telemetry.analysis import analyze, steady_state_window
    from photon_trace.telemetry.trace.importers import load_any

    seconds: dict[str, float] = {}
    info: dict = {}
    # what the page gets: the figure drawn a view's width beyond each side (the pan margin of
    # dashboard/callbacks/timeline.py) and the overview strip, as JSON
    view = View(pad=1.0)

    def page(v: View) -> dict:
        fig = timeline_figure(data, v)
        fig.to_json()
        return fig.layout.meta

    trace = _timed(seconds, "import", lambda: load_any(path))
    info["spans"] = len(trace.host_spans) + len(trace.device_spans)
    window = _timed(seconds, "window", lambda: steady_state_window(trace))
    data = _timed(seconds, "prepare", lambda: prepare_spans(trace, window))
    meta = _timed(seconds, "first_draw", lambda: (overview_figure(data).to_json(), page(view))[1])
    lo, hi = meta["x_range"]        # the whole trace's range, seconds on the view's axis
    mid, half = (lo + hi) / 2, (hi - lo) / 200
    zoomed = _timed(seconds, "zoom", lambda: page(view.with_range((mid - half, mid + half))))
    info.update(mode=meta["mode"], zoom_mode=zoomed["mode"], zoom_spans=zoomed["spans_visible"])
    if not analyse:
        return seconds, info
    report = _timed(seconds, "analysis", lambda: analyze(trace, window))
    _timed(seconds, "bubbles", lambda: with_analysis(data, trace, report, outside_bubbles(trace, report.window)))
    info["steps"] = len(report.steps)
    return seconds, info


def _hta(path: Path) -> tuple[dict, dict]:
    import logging

    from hta.trace_analysis import TraceAnalysis
    logging.getLogger("hta").setLevel(logging.ERROR)
    seconds: dict[str, float] = {}
    ta = _timed(seconds, "parse", lambda: TraceAnalysis(trace_files={0: path.name}, trace_dir=str(path.parent)))
    df, _ = _timed(seconds, "idle_breakdown", lambda: ta.get_idle_time_breakdown(visualize=False))
    seconds["hta"] = seconds["parse"] + seconds["idle_breakdown"]
    return seconds, {"streams": int(df["stream"].nunique())}


def main() -> None:
    stage, path, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if stage.startswith("fit:"):
        import os
        import resource
        mb, _, told = stage[4:].partition(":")
        limit = int(float(mb) * 2**20)
        if told:
            os.environ["PHOTON_TRACE_MEMORY_BUDGET"] = f"{int(float(mb))}M"
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        stage = "gate"
    seconds, info = _hta(path) if stage == "hta" else _ours(stage, path)
    out.write_text(json.dumps({"seconds": seconds, "info": info}))


if __name__ == "__main__":
    main()
