"""The dashboard on the real GPU profiler traces, in headless Chromium (Playwright).

What the page drew (``gd._fullData``) is compared with the analysis of the imported trace.
``PT_DOCS_SCREENSHOTS=1`` writes the README's screenshot (docs/dashboard-kineto.png).
"""
from __future__ import annotations

import html
import os
from pathlib import Path

import pytest

from helpers.browser import CHROMIUM, Server
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.importers import load_any

DATA = Path(__file__).parent / "data" / "kineto"
SYNC = DATA / "critical_path_cuda_event_sync_event_sync_trace.json.gz"
TRAINING = DATA / "trace_filter_sampled_rank-0.json.gz"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")

FIGURE = """() => {
  const gd = document.querySelector('#timeline .js-plotly-plot');
  if (!gd || !gd._fullData || !gd.layout || !gd.layout.meta) return null;
  const polys = (x) => { let n = 0; for (let i = 0; i < x.length; i++) if (x[i] === null || Number.isNaN(x[i])) n++;
                         return x.length ? n + 1 : 0; };
  return {meta: gd.layout.meta, lanes: (gd._fullLayout.yaxis.ticktext || []).slice(),
          traces: gd._fullData.map(t => ({name: t.name, n: t.x ? t.x.length : 0,
                                          polys: t.fill === 'toself' ? polys(t.x) : 0,
                                          text: Array.isArray(t.text) ? t.text.slice(0, 3) : null}))};
}"""


@pytest.fixture(scope="module")
def server():
    s = Server([SYNC, TRAINING], [DATA])
    yield s.url
    s.close()


@pytest.fixture(scope="module")
def page(pages):
    pg = pages.new(1500, 900)
    yield pg
    pg.close()


def drawn(page) -> dict:
    """The timeline as drawn with its analysis: the first draw, of the spans alone, comes before
    the analysis has finished when the machine is busy (``meta.analysed`` false)."""
    page.wait_for_function(f"() => {{ const f = ({FIGURE})(); return f !== null && f.meta.analysed !== false; }}",
                           timeout=60_000)
    return page.evaluate(FIGURE)


def test_an_imported_gpu_trace_draws_its_lanes_bubbles_and_syncs(server, page):
    report = analyze(load_any(SYNC))
    page.goto(server)
    fig = drawn(page)
    # the host thread as a call stack, one row per depth (issue 33), then the device
    assert fig["lanes"] == ["host · thread 948300 (python3.10)", "depth 1", "depth 2", "depth 3", "depth 4",
                            "device · gpu0 stream 7"]
    bubbles = sum(t["polys"] for t in fig["traces"] if t["name"].startswith("bubble:"))
    # 4 gaps split by what covered them (test_kineto_sync_trace): 10 host-bound stretches, the .item()
    # sync's 35 µs, and the 4 launches' latency to their ops
    assert bubbles == len(report.bubbles) == 15
    polys = {t["name"]: t["polys"] for t in fig["traces"]}
    assert (polys["bubble: host-bound launch"], polys["bubble: accidental sync"],
            polys["bubble: device dispatch"]) == (10, 1, 4)
    names = set(polys)
    assert {"kernel", "memory copy", "CPU op", "CUDA runtime", "bubble: accidental sync",
            "bubble: host-bound launch"} <= names
    syncs = sum(t["n"] for t in fig["traces"] if t["name"] == "accidental sync")
    assert syncs == sum(s.count for s in report.syncs) == 3
    # the kernels' own names are in their hover, as Plotly text (``<`` as ``&lt;``: shown as written,
    # never read as markup, issue 32); Plotly shows the entities as the characters
    (hover,) = [t for t in fig["traces"] if t["name"] == "kernel (hover)"]
    assert html.unescape(hover["text"][0]).startswith(
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor")
    # zoomed to the device's work (-40..360 µs; the axis is in seconds): every bubble, its cause,
    # the syncs and the ops above them
    page.evaluate("([a, b]) => Plotly.relayout(document.querySelector('#timeline .js-plotly-plot'),"
                  " {'xaxis.range[0]': a, 'xaxis.range[1]': b})", [-40e-6, 360e-6])
    page.wait_for_function(f"() => {{ const f = ({FIGURE})(); return f && f.meta.x_range[1] < 1e-3; }}")
    out = Path(__file__).resolve().parents[1] / "docs" if os.environ.get("PT_DOCS_SCREENSHOTS") else None
    if out is not None:
        page.screenshot(path=str(out / "dashboard-kineto.png"), clip=page.locator("#timeline").bounding_box())


def test_a_multi_stream_training_trace_opens_from_the_path_box(server, page):
    page.goto(server)
    drawn(page)
    page.fill("#path-input", str(TRAINING))
    page.click("#open-a")
    page.wait_for_function(f"() => {{ const f = ({FIGURE})(); return f && f.lanes.includes('device · gpu0 stream 203'); }}",
                           timeout=60_000)
    fig = page.evaluate(FIGURE)
    assert fig["lanes"][-5:] == [f"device · gpu0 stream {s}" for s in (7, 23, 25, 84, 203)]
    # each host thread's call stack, a row per depth (issue 33)
    assert [x for x in fig["lanes"] if x.startswith("host")] == ["host · thread 4037 (python3.8)",
                                                                "host · thread 23695 (python3.8)"]
    assert fig["lanes"].index("host · thread 23695 (python3.8)") == 11 and len(fig["lanes"]) == 24
