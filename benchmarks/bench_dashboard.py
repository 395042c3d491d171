"""The dashboard at scale, in headless Chromium: first draw after start, Panels, zooms, JS heap.

A synthetic pipelined run with the mask-upload bug (tests/helpers/loop_sim.py drives the
real recorder) of about ``--spans`` spans is written to a trace file; the dashboard is
started as ``photon-trace dashboard`` would run it, in its own process, and a fresh
Chromium page is pointed at it as soon as it listens. Printed, per round:

* first draw: from launching the dashboard process to the timeline drawn (imports,
  loading, the span arrays, drawing and the browser's work, all included: the spans are
  drawn while the analysis still runs); analysed draw: to the bubbles and cards drawn;
* where the first draw's seconds went, on the same clock: the process listening, plotly.js
  run in the page, the timeline graph mounted, the spans' figure received, plotly done
  drawing it (the rest, to "first draw", is the browser painting it and the check seeing it);
* the server-side parts, measured apart in this process: load, window (the analysis
  window), spans (the span arrays), figure (built and JSON-encoded), then analyse and
  bubbles (the analysis' additions to the arrays);
* Panels: from clicking the tab to the step series and tables drawn;
* zooms: each re-draw after a zoom (40 ms, 2 ms, back out) and the JS heap.

Numbers are printed, never judged. Usage::

    .venv/bin/python benchmarks/bench_dashboard.py --spans 500000 --rounds 3
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # the synthetic-run driver and browser helpers live with the tests


def make_trace(spans: int, folder: Path) -> Path:
    from helpers.loop_sim import SyntheticRun, synthetic_trace
    from photon_trace.telemetry.trace.file import write_trace
    from photon_trace.telemetry.tracer import TraceLevel
    steps = max(spans // 10, 10)      # ~10 spans a step at the ON level
    path = folder / f"bench-{spans}.trace.jsonl"
    simulator = ROOT / "tests" / "helpers" / "loop_sim.py"
    if not path.exists() or path.stat().st_mtime < simulator.stat().st_mtime:   # made by an older simulator
        tr = synthetic_trace(SyntheticRun(steps=steps, requests=3 * steps, depth=2, mask_upload_bug=True,
                                          level=TraceLevel.ON))
        write_trace(tr, path)
    return path


# Recorded in the page from its start (performance.now()): plotly.js run, the timeline graph
# mounted, and each time plotly finished drawing the timeline (with whether it was the spans-only
# view).
PAGE_MARKS = """
window.__marks = {draws: []};
(() => { let P; Object.defineProperty(window, 'Plotly', {configurable: true, get() { return P; },
   set(v) { P = v; window.__marks.plotly = performance.now(); }}); })();
new MutationObserver(() => {
  const gd = document.querySelector('#timeline .js-plotly-plot');
  if (!gd || window.__marks.graph) return;
  window.__marks.graph = performance.now();
  gd.on('plotly_afterplot', () => { const m = gd.layout && gd.layout.meta;
    if (m) window.__marks.draws.push([performance.now(), m.analysed === false]); });
}).observe(document, {childList: true, subtree: true});
"""


def server_parts(path: Path) -> dict[str, float]:
    import gc

    from dash._utils import to_json

    from photon_trace.dashboard.sources.store import outside_bubbles
    from photon_trace.dashboard.timeline.data import prepare_spans, with_analysis
    from photon_trace.dashboard.timeline.figure import timeline_figure
    from photon_trace.dashboard.timeline.view import View
    from photon_trace.telemetry.analysis import analyze, steady_state_window
    from photon_trace.telemetry.trace.file import load_trace
    out = {}
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        out[name] = time.perf_counter() - t
        t = time.perf_counter()
    gc.disable()          # as the dashboard does until the spans are drawn
    tr = load_trace(path)
    lap("load")
    window = steady_state_window(tr)
    lap("window")
    spans = prepare_spans(tr, window)
    lap("spans")
    to_json(timeline_figure(spans, View()).to_plotly_json())
    lap("figure")
    gc.enable()
    rep = analyze(tr, window)
    lap("analyse")
    with_analysis(spans, tr, rep, outside_bubbles(tr, rep.window))
    lap("bubbles")
    out["spans total"] = len(tr.host_spans) + len(tr.device_spans)
    return out


def one_round(browser, path: Path) -> dict[str, float]:
    from helpers.browser import ServerProcess, figure, relayout
    out: dict[str, float] = {}
    srv = ServerProcess([path], [path.parent])
    try:
        listening = time.perf_counter() - srv.started
        ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        pg = ctx.new_page()
        pg.add_init_script(PAGE_MARKS)
        received = []
        pg.on("requestfinished", lambda rq: received.append(time.perf_counter() - srv.started)
              if '"output":"..summary.children...timeline.figure' in (rq.post_data or "") else None)
        navigated = time.perf_counter() - srv.started     # the page's performance.now() counts from here
        pg.goto(srv.url)
        figure(pg, "#timeline", timeout_ms=300_000, analysed=False)
        out["first draw"] = time.perf_counter() - srv.started
        marks = pg.evaluate("() => window.__marks")
        spans_drawn = [t for t, partial in marks["draws"] if partial] or [t for t, _ in marks["draws"]]
        out["breakdown"] = {"listening": listening, "plotly.js run": navigated + marks.get("plotly", 0) / 1e3,
                            "graph mounted": navigated + marks.get("graph", 0) / 1e3,
                            "spans received": received[0] if received else float("nan"),
                            "spans drawn": navigated + spans_drawn[0] / 1e3 if spans_drawn else float("nan")}
        fig = figure(pg, "#timeline", timeout_ms=300_000)
        out["analysed draw"] = time.perf_counter() - srv.started
        out["points"] = sum(t["n"] for t in fig["traces"])
        lo, hi = fig["meta"]["x_range"]
        for name, (a, b) in (("zoom 40 ms", (lo + 1.0, lo + 1.04)), ("zoom 2 ms", (lo + 1.01, lo + 1.012)),
                             ("zoom out", (lo, hi))):
            t = time.perf_counter()
            relayout(pg, "#timeline", a, b)
            figure(pg, "#timeline", timeout_ms=120_000, until=f"Math.abs(f.meta.x_range[0] - {a}) < 1e-9")
            out[name] = time.perf_counter() - t
        t = time.perf_counter()
        pg.get_by_text("Panels", exact=True).click()
        figure(pg, "#steps-fig", timeout_ms=120_000)
        pg.wait_for_selector("#bubble-table", timeout=120_000)
        figure(pg, "#idle-breakdown", timeout_ms=120_000)
        out["panels"] = time.perf_counter() - t
        out["heap MB"] = pg.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize / 1e6 : -1")
        ctx.close()
    finally:
        srv.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--folder", default=None, help="where the trace is written (kept between runs)")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from helpers.browser import CHROMIUM, CHROMIUM_ARGS
    folder = Path(args.folder or tempfile.gettempdir()) / "photon-trace-bench-dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    path = make_trace(args.spans, folder)
    print(f"trace: {path} ({path.stat().st_size / 1e6:.0f} MB; made in {time.perf_counter() - t:.1f} s)")
    parts = server_parts(path)
    print(f"server side, in this process: {int(parts.pop('spans total')):,} spans: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()))
    rounds = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for r in range(args.rounds):
            res = one_round(browser, path)
            rounds.append(res)
            print(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f}" + ("" if "MB" in k or k == "points" else " s")
                                                  for k, v in res.items() if k != "breakdown"))
            print("  first draw, from the process start: " + ", ".join(f"{k} at {v:.2f} s"
                                                                     for k, v in res["breakdown"].items()))
        browser.close()
    keys = [k for k in rounds[0] if k not in ("points", "breakdown")]
    print("median over rounds: " + ", ".join(f"{k} {statistics.median(r[k] for r in rounds):.2f}" for k in keys))
    print("  first draw, median: " + ", ".join(f"{k} at {statistics.median(r['breakdown'][k] for r in rounds):.2f} s"
                                                for k in rounds[0]["breakdown"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
