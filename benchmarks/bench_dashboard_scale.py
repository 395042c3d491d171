"""The dashboard's timeline at millions of spans: opening (arrays and lane index), the first
view and each zoom, on traces held as ``Columns`` built in numpy.

Each trace is a real simulated run (tests/helpers/columns_trace.py: ~10 spans a step, two
streams, waits, requests) repeated end to end to ``--spans`` host and device spans, with no
tuple per record. Timed, per size: building the columns (not the dashboard's cost), the
steady-state window (the analysis' part the timeline waits for), ``prepare_timeline``
(arrays, sorting, the per-lane index), the first view as the page gets it (the figure with
its pan margin, the overview strip, both as JSON) and a zoom in steps of 4x from the whole
trace to a few steps (each one figure + JSON: the median and the slowest are printed).
Peak RSS is the process's (it includes the trace itself). With ``--analyse``, also what the
page needs from the analysis, once: the report (``analyze``: the analysis' own cost), the
bubbles outside its window, the timeline with bubbles and sync links (``with_analysis``) and
the page's report-driven parts (cards, "what to fix first", the Panels tab).
Prints numbers; never fails on speed.

    python benchmarks/bench_dashboard_scale.py [--spans 1000000 2000000] [--repeats 3] [--analyse]
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.columns_trace import tiled_trace  # noqa: E402
from photon_trace.dashboard.timeline.data import prepare_timeline  # noqa: E402
from photon_trace.dashboard.timeline.figure import timeline_figure  # noqa: E402
from photon_trace.dashboard.timeline.overview import overview_figure  # noqa: E402
from photon_trace.dashboard.timeline.view import View  # noqa: E402
from photon_trace.telemetry.analysis import steady_state_window  # noqa: E402

PAD = 1.0   # what the page asks for (callbacks/timeline.py: drawn a view's width beyond each side)


def timed(fn, repeats: int):
    out, times = None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def page_view(data, rng):
    """What a draw costs the server: the timeline figure and the overview, serialised."""
    fig = timeline_figure(data, View(rng, pad=PAD))
    body = fig.to_json()
    body += overview_figure(data, "window", rng).to_json()
    return fig.layout.meta, len(body)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def analysed(trace, window, data) -> dict:
    """Seconds for each part of the page that waits for the analysis."""
    from photon_trace.dashboard.callbacks.panels import panel_children
    from photon_trace.dashboard.callbacks.timeline import fix_first
    from photon_trace.dashboard.layout import summary_cards
    from photon_trace.dashboard.panels.figures import step_series_figure
    from photon_trace.dashboard.sources.store import Loaded, outside_bubbles
    from photon_trace.dashboard.timeline.data import with_analysis
    from photon_trace.telemetry.analysis import analyze
    report, t_analyse = timed(lambda: analyze(trace, window), 1)
    outside, t_outside = timed(lambda: outside_bubbles(trace, report.window), 1)
    full, t_with = timed(lambda: with_analysis(data, trace, report, outside), 1)
    loaded = Loaded("bench", "bench", trace, report, full, [])
    _, t_cards = timed(lambda: (summary_cards(report), fix_first(loaded)), 1)
    _, t_panels = timed(lambda: (step_series_figure(report), panel_children(loaded)), 1)
    (_, _), t_view = timed(lambda: page_view(full, None), 1)
    return dict(analyse=t_analyse, outside=t_outside, with_analysis=t_with, cards=t_cards, panels=t_panels,
                view=t_view, bubbles=len(full.bubbles))


def one_size(spans: int, repeats: int, analyse: bool = False, window: bool = True) -> dict:
    gc.collect()
    t0 = time.perf_counter()
    trace = tiled_trace(spans)
    build = time.perf_counter() - t0
    n = len(trace.host_spans) + len(trace.device_spans)
    # the window reads records today (the analysis' part): --no-window skips it at sizes where
    # its tuples would not fit beside the trace
    window, t_window = timed(lambda: steady_state_window(trace), 1) if window else (None, float("nan"))
    data, t_prepare = timed(lambda: prepare_timeline(trace, None), repeats)
    (meta, size), t_first = timed(lambda: page_view(data, None), repeats)
    lo, hi = data.full_range()
    zooms, modes = [], []
    width = hi - lo
    centre = lo + 0.37 * width
    while width > 2e-3:   # down to ~one step of ~2.5 ms
        width /= 4
        rng = (centre - width / 2, centre + width / 2)
        (m, _), t = timed(lambda: page_view(data, rng), repeats)
        zooms.append(t)
        modes.append(m["mode"])
    index_mb = sum(st.by_lane.nbytes() for st in data.sets) / 1e6
    arrays_mb = sum(st.t0.nbytes + st.t1.nbytes + st.lane.nbytes + st.index.nbytes + st.info.nbytes
                    for st in data.sets) / 1e6
    out = dict(spans=n, build=build, window=t_window, prepare=t_prepare, first=t_first, json_mb=size / 1e6,
               mode=meta["mode"], zoom_median=statistics.median(zooms), zoom_max=max(zooms), zooms=len(zooms),
               exact=modes.count("exact"), arrays_mb=arrays_mb, index_mb=index_mb,
               trace_mb=sum(getattr(trace, k).nbytes() for k in ("host_spans", "device_spans", "waits", "steps",
                                                                 "requests")) / 1e6,
               rss=peak_rss_mb())
    if analyse:
        out["analysis"] = analysed(trace, window, data)
        out["rss"] = peak_rss_mb()
    del data, trace
    gc.collect()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spans", type=int, nargs="+", default=[1_000_000, 2_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--analyse", action="store_true", help="also time what the page needs from the analysis")
    ap.add_argument("--no-window", action="store_true", help="skip the steady-state window (it reads records)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; medians of {args.repeats}")
    print("\n| spans | build columns s | window s | prepare_timeline s | first view s | first view JSON MB "
          "| zoom median s | zoom max s | zooms (exact) | arrays MB | index MB | trace MB | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    done = []
    for n in args.spans:
        r = one_size(n, args.repeats, args.analyse, not args.no_window)
        done.append(r)
        print(f"| {r['spans']:,} | {r['build']:.2f} | {r['window']:.2f} | {r['prepare']:.2f} | {r['first']:.2f} "
              f"| {r['json_mb']:.1f} | {r['zoom_median']:.3f} | {r['zoom_max']:.3f} | {r['zooms']} ({r['exact']}) "
              f"| {r['arrays_mb']:.0f} | {r['index_mb']:.0f} | {r['trace_mb']:.0f} | {r['rss']:.0f} |", flush=True)
    if args.analyse:
        print("\n| spans | analyze s | bubbles outside window s | with_analysis s | cards + fix first s "
              "| Panels tab s | view with bubbles s | bubbles |\n|---|---|---|---|---|---|---|---|")
        for r in done:
            a = r["analysis"]
            print(f"| {r['spans']:,} | {a['analyse']:.2f} | {a['outside']:.2f} | {a['with_analysis']:.2f} "
                  f"| {a['cards']:.2f} | {a['panels']:.2f} | {a['view']:.2f} | {a['bubbles']:,} |")


if __name__ == "__main__":
    main()
