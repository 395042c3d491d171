"""A 100,000-event PyTorch profiler trace: import, analysis and dashboard drawing, against our own trace.

Builds a synthetic training-loop profiler trace (tests/helpers/kineto_builder.py: steps of
ops launching kernels, an all-reduce on a second stream, a ``.item()`` sync per step) of
about ``--events`` events, gzipped as the profiler writes it, and times (median of
``--repeats``): reading and importing it, analysing it, and the dashboard's server side
(``prepare_timeline`` + the first, zoomed-out draw). The same for one of our own traces with
as many spans (tests/helpers/loop_sim.py). With ``--browser`` (needs /usr/bin/chromium and
Playwright) also the time from opening the page to a drawn timeline in headless Chromium,
for both, each served by ``photon-trace dashboard``'s app in its own process.
Prints the numbers; never fails on speed.

    python benchmarks/bench_kineto_scale.py [--events 100000] [--repeats 3] [--browser]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.kineto_builder import training_trace  # noqa: E402
from helpers.loop_sim import SyntheticRun, synthetic_trace  # noqa: E402
from photon_trace.dashboard.timeline.data import prepare_timeline  # noqa: E402
from photon_trace.dashboard.timeline.draw import draw as timeline_traces  # noqa: E402
from photon_trace.dashboard.timeline.view import View  # noqa: E402
from photon_trace.telemetry.analysis import analyze  # noqa: E402
from photon_trace.telemetry.trace.file import write_trace  # noqa: E402
from photon_trace.telemetry.trace.importers import load_any  # noqa: E402
from photon_trace.telemetry.tracer import TraceLevel  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
KERNELS_PER_STEP = 100


def timed(fn, repeats: int):
    out, times = None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def server_side(path: Path, repeats: int) -> dict:
    trace, t_load = timed(lambda: load_any(path), repeats)
    report, t_analyse = timed(lambda: analyze(trace), repeats)
    data, t_prepare = timed(lambda: prepare_timeline(trace, report), repeats)
    (traces, meta), t_draw = timed(lambda: timeline_traces(data, View()), repeats)
    return dict(trace=trace, report=report, load=t_load, analyse=t_analyse, prepare=t_prepare, draw=t_draw,
                spans=len(trace.host_spans) + len(trace.device_spans), mode=meta["mode"])


def browser_draw(path: Path) -> float:
    """Seconds from navigation to a drawn timeline (second visit, fresh context), the app in its own process."""
    from playwright.sync_api import sync_playwright
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = ("import sys; from photon_trace.dashboard.app import create_app; "
            "create_app([sys.argv[1]], [sys.argv[2]], None).run(host='127.0.0.1', port=int(sys.argv[3]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(path.parent), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ready = "() => { const gd = document.querySelector('#timeline .js-plotly-plot'); " \
            "return gd && gd._fullData && gd._fullData.length > 0 && gd.layout.meta; }"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], headless=True)
            out = []
            for _ in range(2):   # the first visit waits for the server's load and analysis
                ctx = b.new_context(viewport={"width": 1600, "height": 1000})
                pg = ctx.new_page()
                t0 = time.perf_counter()
                pg.goto(f"http://127.0.0.1:{port}/")
                pg.wait_for_function(ready, timeout=120_000)
                out.append(time.perf_counter() - t0)
                ctx.close()
            b.close()
        return out[-1]
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--browser", action="store_true", help="also time the draw in headless Chromium")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        per_step = 5 * KERNELS_PER_STEP + 18    # op, launch, kernel, two flows per kernel; the all-reduce and .item()
        b = training_trace(max(1, -(-args.events // per_step)), kernels_per_step=KERNELS_PER_STEP)
        kineto = b.write(tmp / "training.pt.trace.json.gz")
        print(f"profiler trace: {len(b.events):,} events, {kineto.stat().st_size / 1e6:.1f} MB gzipped "
              f"(machine: {os.cpu_count()} CPUs, shared: medians of {args.repeats})")
        k = server_side(kineto, args.repeats)
        # Our own trace with about as many spans (ON level: ~10 spans per step).
        target = k["spans"]
        steps = max(100, target // 10)
        own = synthetic_trace(SyntheticRun(steps=steps, requests=3 * steps, depth=2, mask_upload_bug=True,
                                           level=TraceLevel.ON))
        ours = write_trace(own, tmp / "own.trace.jsonl")
        o = server_side(ours, args.repeats)
        rows = [("profiler trace", k), ("our own trace", o)]
        print("\n| trace | spans | read + import s | analyse s | import + analyse s | prepare_timeline s "
              "| first draw s | draw mode |\n|---|---|---|---|---|---|---|---|")
        for name, r in rows:
            print(f"| {name} | {r['spans']:,} | {r['load']:.2f} | {r['analyse']:.2f} | {r['load'] + r['analyse']:.2f} "
                  f"| {r['prepare']:.2f} | {r['draw']:.2f} | {r['mode']} |")
        rep = k["report"]
        print(f"\nprofiler trace analysed: {len(rep.steps)} steps, {len(rep.bubbles):,} bubbles on {rep.stream}, "
              f"idle {rep.idle_fraction:.1%}, {sum(s.count for s in rep.syncs):,} syncs in the window")
        if args.browser:
            if not os.path.exists(CHROMIUM):
                print(f"\n{CHROMIUM} is missing: no browser timing")
                return
            print(f"\nheadless Chromium, page open to drawn timeline: profiler trace {browser_draw(kineto):.2f} s, "
                  f"our own trace {browser_draw(ours):.2f} s")


if __name__ == "__main__":
    main()
