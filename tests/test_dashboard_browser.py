"""End to end: the dashboard served on loopback and driven in headless Chromium (Playwright):
the main views, their honest drawing, definitions, compare and the cost model, bad input,
and a long trace.

Counts on the page are read from the plotted figure itself (``gd._fullData``:
what plotly drew) and compared with what the analysis reports.
"""
from __future__ import annotations

import math
import os
import time

import pytest

from photon_trace.telemetry.trace.file import write_trace
from helpers.browser import (CHROMIUM, Server, ServerProcess, figure, hover_points, markers, open_as_a,
                             polygons, relayout)
from helpers.dashboard_samples import LONG_STEPS, report, sample, span_count, timeline, write_samples
from helpers.loop_sim import SyntheticRun, synthetic_trace

DRAW_LIMIT_S = 5.0

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")


@pytest.fixture
def page(pages):
    pg = pages.new(1600, 1000)
    yield pg
    pg.close()


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    return d, write_samples(d)


@pytest.fixture(scope="module")
def server(samples):
    d, files = samples
    s = Server([files["mask_sync"], files["blocking"]], [d])
    yield s
    s.close()


def test_page_shows_the_lanes_bubbles_and_syncs_the_analysis_reports(server, page):
    rep = report("mask_sync")
    page.goto(server.url)
    fig = figure(page, "#timeline")
    assert fig["lanes"] == ["host · scheduler", "device · compute", "device · copy", "requests"]
    assert fig["canvases"] > 0 and all(t["type"] == "scattergl" for t in fig["traces"])
    assert fig["meta"]["mode"] == "exact"
    assert hover_points(fig, "bubble: ") == len(timeline("mask_sync").bubbles) >= len(rep.bubbles) > 0
    assert markers(fig) == sum(s.count for s in rep.syncs) > 0
    assert page.inner_text("#summary-accidental_syncs") == f"{sum(s.count for s in rep.syncs):,}"
    assert page.inner_text("#summary-period_ms") == f"{rep.period_ms:.3f} ms"


def test_overview_drawing_is_honest_short_spans_show_and_no_bubble_is_widened(server, page):
    """Item 5: zoomed out, the copy lane's sub-pixel copies are drawn (as their share of a
    pixel column), and bubbles are drawn no wider than they are."""
    page.goto(server.url)
    fig = figure(page, "#timeline")
    data = timeline("mask_sync")
    lo, hi = fig["range"]
    px = (hi - lo) / 1600
    copies = data.set_named("copy_back")
    assert (copies.t1 - copies.t0).max() / 1e9 < px                    # each copy is under a pixel wide ...
    assert polygons(fig, "copy-back") > 0                              # ... and the copy lane is not empty
    assert fig["meta"]["in_columns"] > 0
    widths = page.evaluate("""() => {
      const gd = document.querySelector('#timeline .js-plotly-plot');
      return gd._fullData.filter(t => t.name.startsWith('bubble: ') && !t.name.endsWith('(hover)'))
        .map(t => { const w = []; for (let i = 0; i + 1 < t.x.length; i += 6) w.push(t.x[i + 1] - t.x[i]); return w; });
    }""")
    # a gap with several parts of one cause (plan, then launch) is adjacent bubbles of that cause
    runs: list[list] = []
    for b in sorted(data.bubbles, key=lambda b: (b.cause, b.t0)):
        if runs and runs[-1][0] == b.cause and runs[-1][2] == b.t0:
            runs[-1][2] = b.t1
        else:
            runs.append([b.cause, b.t0, b.t1])
    longest = max((t1 - t0) / 1e9 for _, t0, t1 in runs)
    # a block covers the pixel columns a run of bubbles touches, never more (the old drawing
    # widened every bubble to 3 px): a run of length l touches at most ceil(l / px) + 1 columns
    assert max(w for ws in widths for w in ws) <= (math.ceil(longest / px) + 1) * px * 1.0001


def test_zoom_redraws_only_the_visible_range_in_adaptive_units(server, page):
    page.goto(server.url)
    full = figure(page, "#timeline")
    lo, hi = full["meta"]["x_range"]
    a, b = lo + (hi - lo) * 0.4, lo + (hi - lo) * 0.41
    t0 = time.perf_counter()
    relayout(page, "#timeline", a, b)
    zoomed = figure(page, "#timeline", until=f"Math.abs(f.meta.x_range[0] - {a}) < 1e-9")
    print(f"\nzoom re-draw: {time.perf_counter() - t0:.2f} s")
    assert zoomed["meta"]["spans_visible"] < full["meta"]["spans_visible"]
    assert any(t.endswith("ms") for t in full["ticks"])                # 50ms, 100ms ... over the whole run
    assert any(t.endswith("µs") or t.endswith("ms") for t in zoomed["ticks"])
    assert not any("e-" in t for t in zoomed["ticks"])


def test_a_graph_is_drawn_again_on_resize_only_when_its_size_changed(server, page):
    """dcc.Graph asks plotly to resize whenever its box changes, and plotly re-drew the whole
    figure even at the same size (the timeline replacing its placeholder was drawn twice). The
    same size draws nothing; a narrower window still re-draws the timeline to fit it."""
    page.goto(server.url)
    figure(page, "#timeline")
    draws_on_resize = """async (sel) => {
      const gd = document.querySelector(sel + ' .js-plotly-plot'); let n = 0; const count = () => n++;
      gd.on('plotly_afterplot', count); await Plotly.Plots.resize(gd); gd.removeListener('plotly_afterplot', count);
      return [n, gd._fullLayout.width]; }"""
    draws, width = page.evaluate(draws_on_resize, "#timeline")
    assert draws == 0
    page.set_viewport_size({"width": 1100, "height": 1000})
    page.wait_for_function(f"() => document.querySelector('#timeline .js-plotly-plot')._fullLayout.width < {width}",
                           timeout=20_000)


def test_webgl_draws_at_the_screens_resolution(server, pages):
    """plotly fills its WebGL canvases at twice their pixels unless told; the page tells it the
    screen's ratio: one backing pixel per pixel on an ordinary screen, two on a high-DPI one."""
    canvases = "() => [...document.querySelectorAll('#timeline canvas')].map(c => [c.width, c.clientWidth])"
    for ratio in (1, 2):
        pg = pages.new(1400, 900, scale=ratio)
        try:
            pg.goto(server.url)
            figure(pg, "#timeline")
            assert pg.evaluate("window.devicePixelRatio") == ratio
            sizes = pg.evaluate(canvases)
            assert sizes and all(w == ratio * cw > 0 for w, cw in sizes), sizes
        finally:
            pg.close()


def test_every_card_and_table_header_has_a_definition_on_hover(server, page):
    """Item 7: each card and column header carries its definition (the README's glossary)."""
    page.goto(server.url)
    figure(page, "#timeline")
    page.wait_for_selector("#fix-first-table")
    titles = page.evaluate("""() => [...document.querySelectorAll('.pt-card, th')].map(e => [e.innerText, e.title])""")
    assert len(titles) > 15 and all(t.strip() for _, t in titles), [x for x in titles if not x[1].strip()]
    host_late = page.get_attribute("#summary-host_idle_fraction >> xpath=..", "title")
    assert "launch latency" in host_late and "accidental sync" in host_late   # why it differs from the sync's share
    page.get_by_text("Panels", exact=True).click()
    page.wait_for_selector("#diagnosis-table")
    heads = page.evaluate("() => [...document.querySelectorAll('#panel-tables th')].map(e => e.title)")
    assert heads and all(heads)


def test_panels_show_diagnosis_bubbles_idle_breakdown_and_labelled_histograms(server, page):
    rep = report("mask_sync")
    page.goto(server.url)
    figure(page, "#timeline")
    page.get_by_text("Panels", exact=True).click()
    steps = figure(page, "#steps-fig", until="true")
    assert sum(t["type"] == "bar" for t in steps["traces"]) == 2
    axis_titles = page.evaluate("""() => { const fl = document.querySelector('#steps-fig .js-plotly-plot')._fullLayout;
      return Object.keys(fl).filter(k => /^[xy]axis/.test(k)).map(k => fl[k].title && fl[k].title.text); }""")
    assert {"period (ms)", "idle per step (ms)", "steps"} <= set(axis_titles)
    # no subplot title is drawn over an axis title or tick label (issue 33: "idle histogram" was)
    overlaps = page.evaluate("""() => {
      const gd = document.querySelector('#steps-fig .js-plotly-plot');
      const boxes = (sel) => [...gd.querySelectorAll(sel)].map(e => [e.textContent, e.getBoundingClientRect()]);
      const titles = boxes('.infolayer .annotation-text');
      const labels = boxes('.infolayer g[class^="g-"][class$="title"] text, g[class$="tick"] > text');
      const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
      return titles.flatMap(([t, a]) => labels.filter(([, b]) => hit(a, b)).map(([l]) => t + ' / ' + l));
    }""")
    assert len(axis_titles) and overlaps == []
    assert rep.syncs[0].site in page.inner_text("#diagnosis-table")
    assert page.locator("#bubble-table tbody tr").count() == min(len(rep.bubbles), 100)
    breakdown = figure(page, "#idle-breakdown")
    assert breakdown["meta"]["streams"] == ["compute", "copy"]


def test_compare_view_shows_both_traces_and_hides_a_cost_model_that_does_not_apply(server, page):
    a = report("mask_sync")
    page.goto(server.url)
    figure(page, "#timeline")
    page.get_by_text("Compare", exact=True).click()
    fig = figure(page, "#compare-timeline", until="f.meta.a && f.meta.b")
    assert fig["lanes"] and fig["lanes2"]
    assert hover_points(fig, "bubble: ", "y") == len(timeline("mask_sync").bubbles)
    assert hover_points(fig, "bubble: ", "y2") == len(timeline("blocking").bubbles)
    assert markers(fig, "y") == sum(s.count for s in a.syncs) and markers(fig, "y2") == 0
    labels = fig["meta"]["labels"]
    assert "mask_sync" in labels[0] and "blocking" in labels[1]
    table = page.inner_text("#compare-table")
    assert "device idle" in table and "accidental syncs" in table
    assert "±5%" in page.inner_text("#noise-note")
    # a pipelined run with the mask bug against a blocking one without it: not one workload
    assert "not the same workload" in page.inner_text("#cost-model-why")
    assert page.locator("#cost-model-table").count() == 0
    # the A/B labels sit clear of the legend
    boxes = page.evaluate("""() => {
      const gd = document.querySelector('#compare-timeline .js-plotly-plot');
      const r = (e) => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
      return {legend: r(gd.querySelector('.legend')),
              labels: [...gd.querySelectorAll('.annotation')].filter(a => a.textContent.match(/^[AB] ·/)).map(r)};
    }""")
    lg = boxes["legend"]
    assert len(boxes["labels"]) == 2
    for x0, y0, x1, y1 in boxes["labels"]:
        assert x1 <= lg[0] or x0 >= lg[2] or y1 <= lg[1] or y0 >= lg[3]


def test_the_cost_model_shows_for_a_blocking_and_pipelined_pair_with_noise_called_noise(samples, pages, tmp_path):
    d, files = samples
    twin = write_trace(synthetic_trace(SyntheticRun(depth=2, steps=80, requests=30, seed=1)),
                       d / "pipelined-seed1.trace.jsonl")
    s = Server([files["blocking"], files["pipelined"]], [d])
    pg = pages.new(1600, 1000)
    try:
        pg.goto(s.url)
        figure(pg, "#timeline")
        pg.get_by_text("Compare", exact=True).click()
        pg.wait_for_selector("#cost-model-table", timeout=30_000)
        assert "predicted speedup" in pg.inner_text("#cost-model-table")
        # two pipelined runs of one workload differing only in jitter: nothing is called worse
        open_as_a(pg, files["pipelined"])
        pg.fill("#path-input", str(twin))
        pg.click("#open-b")
        pg.wait_for_function("() => document.querySelector('#compare-summary') && "
                             "document.querySelector('#compare-summary').innerText.includes('seed1')", timeout=30_000)
        verdicts = pg.evaluate("() => [...document.querySelectorAll('#compare-table tbody tr')]"
                               ".map(r => r.lastChild.innerText)")
        assert "within noise" in verdicts and "worse" not in verdicts, verdicts
        assert "depths 2 and 2" in pg.inner_text("#cost-model-why")
    finally:
        pg.close()
        s.close()


def test_a_corrupt_file_shows_an_error_and_keeps_the_good_view(server, samples, page):
    d, files = samples
    page.goto(server.url)
    good = figure(page, "#timeline")
    page.fill("#path-input", str(files["corrupt"]))
    page.click("#open-a")
    page.wait_for_selector("#path-error .pt-error", timeout=20_000)
    assert "corrupt.trace.jsonl" in page.inner_text("#path-error")
    assert "mask_sync" in page.inner_text("#trace-a")                  # A is still the good trace ...
    assert figure(page, "#timeline")["meta"]["spans_total"] == good["meta"]["spans_total"]   # ... and drawn
    page.fill("#path-input", str(files["blocking"]))
    page.click("#open-a")
    fig = figure(page, "#timeline", until=f"f.meta.bubbles === {len(timeline('blocking').bubbles)}")
    assert fig["meta"]["mode"] == "exact"
    assert page.locator("#path-error .pt-error").count() == 0


def test_a_blank_path_says_so_and_a_path_outside_the_allowed_folders_is_refused(server, page, tmp_path):
    page.goto(server.url)
    figure(page, "#timeline")
    page.fill("#path-input", "   ")
    page.click("#open-a")
    page.wait_for_selector("#path-error .pt-error", timeout=20_000)
    assert "enter a path" in page.inner_text("#path-error")
    outside = tmp_path / "elsewhere.trace.jsonl"
    write_trace(sample("blocking"), outside)
    page.fill("#path-input", str(outside))
    page.click("#open-a")
    page.wait_for_function("() => document.querySelector('#path-error').innerText.includes('refused')",
                           timeout=20_000)


def _open_and_time(pg, url: str) -> tuple[float, dict]:
    """Seconds from navigation to a drawn timeline; the server's own port, so no script of it
    is cached."""
    t0 = time.perf_counter()
    pg.goto(url)
    fig = figure(pg, "#timeline", timeout_ms=120_000)
    return time.perf_counter() - t0, fig


@pytest.mark.slow
def test_a_10000_step_trace_is_drawn_per_pixel_column_and_zooms_to_exact(pages, samples, tmp_path):
    """The test checks what is drawn; the time to the first drawing, the server's load and
    analysis included, is printed (benchmarks/bench_dashboard.py measures it, at 500k spans).
    It no longer opens the page a second time only to print a warm server's time."""
    tr = sample("long")
    path = write_trace(tr, tmp_path / "long.trace.jsonl")
    assert len({s.step for s in tr.steps}) == LONG_STEPS and span_count(tr) >= 60_000
    server = ServerProcess([path], [tmp_path])
    pg = pages.new(1600, 1000)     # the session's context outlives the test: closed on every path
    try:
        cold, fig = _open_and_time(pg, server.url)
        print(f"\nlong trace: {LONG_STEPS} steps, {span_count(tr):,} spans: drawn in {cold:.2f} s on a cold "
              f"server, {sum(t['n'] for t in fig['traces']):,} points")
        assert fig["meta"]["mode"] == "aggregate"
        lo, hi = fig["meta"]["x_range"]
        relayout(pg, "#timeline", lo + 1.0, lo + 1.04)
        zoomed = figure(pg, "#timeline", until="f.meta.mode === 'exact'")
        assert zoomed["meta"]["spans_visible"] < fig["meta"]["spans_visible"] / 100
    finally:
        pg.close()
        server.close()
