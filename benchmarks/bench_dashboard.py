"""The dashboard at scale, in headless Chromium: first draw after start, Panels, zooms, JS heap.

A synthetic pipelined run with the mask-upload bug (tests/helpers/loop_sim.py drives the
real recorder) of about ``--spans`` spans is written to a trace file; the dashboard is
started as ``photon-trace dashboard`` would run it, in its own process, and a fresh
Chromium page is pointed at it as soon as it listens. Printed, per round:

* first draw: from launching the dashboard process to the timeline drawn (imports,
  loading, the span arrays, drawing and the browser's work, all included: the spans are
  drawn while the analysis still runs); analysed draw: to the bubbles and cards drawn;
* the server-side parts of it, measured apart in this process (load, analyse, prepare);
* Panels: from clicking the tab to the step series and tables drawn;
* zooms: each re-draw after a zoom (40 ms, 2 ms, back out) and the JS heap.

Numbers are printed, never judged. Usage::

    .venv/bin/python benchmarks/bench_dashboard.py --spans 500000 --rounds 2
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
    from photon_trace.telemetry.tracefile import write_trace
    from photon_trace.telemetry.tracer import TraceLevel
    steps = max(spans // 10, 10)      # ~10 spans a step at the ON level
    path = folder / f"bench-{spans}.trace.jsonl"
    if not path.exists():
        tr = synthetic_trace(SyntheticRun(steps=steps, requests=3 * steps, depth=2, mask_upload_bug=True,
                                          level=TraceLevel.ON))
        write_trace(tr, path)
    return path


def server_parts(path: Path) -> dict[str, float]:
    from photon_trace.dashboard.timeline_data import prepare_timeline
    from photon_trace.telemetry.analysis import analyze
    from photon_trace.telemetry.tracefile import load_trace
    out = {}
    t = time.perf_counter()
    tr = load_trace(path)
    out["load"] = time.perf_counter() - t
    t = time.perf_counter()
    rep = analyze(tr)
    out["analyse"] = time.perf_counter() - t
    from photon_trace.dashboard.sources import outside_bubbles
    t = time.perf_counter()
    prepare_timeline(tr, rep, outside_bubbles(tr, rep.window))
    out["prepare"] = time.perf_counter() - t
    out["spans"] = len(tr.host_spans) + len(tr.device_spans)
    return out


def one_round(browser, path: Path) -> dict[str, float]:
    from helpers.browser import ServerProcess, figure, relayout
    out: dict[str, float] = {}
    srv = ServerProcess([path], [path.parent])
    try:
        ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        pg = ctx.new_page()
        pg.goto(srv.url)
        figure(pg, "#timeline", timeout_ms=300_000, analysed=False)
        out["first draw"] = time.perf_counter() - srv.started
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
    print(f"server side, in this process: {int(parts['spans']):,} spans: load {parts['load']:.2f} s, "
          f"analyse {parts['analyse']:.2f} s, prepare {parts['prepare']:.2f} s")
    rounds = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for r in range(args.rounds):
            res = one_round(browser, path)
            rounds.append(res)
            print(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f}" + ("" if "MB" in k or k == "points" else " s")
                                                  for k, v in res.items()))
        browser.close()
    keys = [k for k in rounds[0] if k != "points"]
    print("median over rounds: " + ", ".join(f"{k} {statistics.median(r[k] for r in rounds):.2f}" for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
