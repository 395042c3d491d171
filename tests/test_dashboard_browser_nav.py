"""What a Perfetto or Nsight user reaches for, in real Chromium: click to select (details, the
enqueue flow, the sync-to-bubble link), range statistics, W/S/A/D keys, go to step, search,
table rows that jump, the overview strip, time units and axes, legend state, the requests
lane, the analysis window explained, and the guided first view."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from photon_trace.dashboard.panels.figures import ranked_diagnoses
from photon_trace.dashboard.sources.store import TraceStore
from photon_trace.telemetry.export.perfetto import chrome_trace
from helpers.browser import CHROMIUM, Server, click_point, figure, relayout
from helpers.dashboard_samples import report, sample, timeline, write_samples

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")
ENGINE_SYNC_TRACE = Path(__file__).resolve().parents[1] / "traces" / "tiny-point-s8-mask-sync-pipelined.trace.jsonl"
ENGINE_ASYNC_TRACE = ENGINE_SYNC_TRACE.with_name("tiny-point-s8-mask-async-pipelined.trace.jsonl")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    files = write_samples(d)
    s = Server([files["mask_sync"], files["blocking"]], [d])
    yield s
    s.close()


@pytest.fixture
def page(pages, server):
    pg = pages.new(1600, 1100)
    pg.goto(server.url)
    figure(pg, "#timeline")
    yield pg
    pg.close()


def zoom_to_step(page, step: int) -> dict:
    page.fill("#goto-step", str(step))
    page.press("#goto-step", "Enter")
    return figure(page, "#timeline", until="f.meta.mode === 'exact' && f.meta.spans_visible < 200")


def test_clicking_a_device_op_shows_its_fields_its_step_and_the_host_span_that_enqueued_it(page):
    zoom_to_step(page, 40)
    click_point(page, "#timeline", "forward (hover)", 0)
    page.wait_for_selector("#details-fields", timeout=20_000)
    fields = page.inner_text("#details-fields")
    for key in ("stream", "op", "step", "slot", "t0", "t1", "enqueued", "launch delay", "Perfetto ts"):
        assert key in fields
    assert "enqueued by the host's" in page.inner_text("#details-related")
    ops = page.inner_text("#details-ops")
    assert "launch" in ops and "forward" in ops and "commit" in ops
    fig = figure(page, "#timeline", until="f.annotations.some(a => a.hovertext === 'enqueued by')")
    assert any(s["name"] == "selected" for s in fig["shapes"])


def test_clicking_a_sync_shows_its_call_site_and_links_the_bubble_it_caused(page):
    zoom_to_step(page, 40)
    click_point(page, "#timeline", "accidental sync", 0)
    page.wait_for_function("() => document.querySelector('#details-title') && "
                           "document.querySelector('#details-title').innerText.startsWith('accidental sync')",
                           timeout=20_000)
    assert report("mask_sync").syncs[0].site in page.inner_text("#details-fields")
    assert "bubble(s)" in page.inner_text("#details-related") and "caused" in page.inner_text("#details-related")
    fig = figure(page, "#timeline", until="f.annotations.some(a => a.hovertext === 'idle it caused')")
    assert any(t["name"] == "sync → the bubble it caused" for t in fig["traces"])   # drawn for every sync too
    # the bubble's own details point back at the sync, in the tables' words
    click_point(page, "#timeline", "bubble: accidental sync (hover)", 0)
    page.wait_for_function("() => document.querySelector('#details-title').innerText.startsWith('bubble: accidental sync')",
                           timeout=20_000)
    assert "caused by the accidental sync at" in page.inner_text("#details-related")
    assert "host code" in page.inner_text("#details-fields")


def test_a_box_selected_range_gets_statistics_per_name_and_lane_and_its_idle_by_cause(page):
    zoom_to_step(page, 40)
    page.locator("#timeline .modebar-btn[data-attr='dragmode'][data-val='select']").click()
    box = page.locator("#timeline .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] * 0.3
    page.mouse.move(box["x"] + box["width"] * 0.1, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.9, y + 20, steps=8)
    page.mouse.up()
    page.wait_for_selector("#range-table", timeout=20_000)
    table = page.inner_text("#range-table")
    for col in ("name", "lane", "count", "total", "mean", "p50", "p99"):
        assert col in table
    assert "forward" in table and "device · compute" in table
    assert "accidental sync" in page.inner_text("#range-idle")
    figure(page, "#timeline", until="f.shapes.some(s => s.name === 'selected range')")


def test_w_s_a_d_zoom_and_pan_like_perfetto(page):
    # the keys move the plotted axis at once, in the page; the server re-draws only when the
    # view needs data the page lacks (issue 33), so the axis range is what is read here
    full = figure(page, "#timeline")
    lo, hi = full["range"]
    page.mouse.move(5, 5)                                  # not over the plot: zoom about the centre
    page.keyboard.press("w")
    z = figure(page, "#timeline", until=f"f.range[1] - f.range[0] < {0.8 * (hi - lo)}")
    w = z["range"][1] - z["range"][0]
    assert w == pytest.approx(0.7 * (hi - lo), rel=1e-3)
    page.keyboard.press("d")
    panned = figure(page, "#timeline", until=f"f.range[0] > {z['range'][0] + 0.1 * w}")
    assert panned["range"][0] == pytest.approx(z["range"][0] + 0.2 * w, rel=1e-3)
    page.keyboard.press("s")
    figure(page, "#timeline", until=f"f.range[1] - f.range[0] > {0.95 * w / 0.7}")
    page.fill("#search", "ww")                             # keys typed into a box are not navigation
    assert figure(page, "#timeline")["range"][1] - figure(page, "#timeline")["range"][0] > w


def test_go_to_step_search_and_the_bubble_table_bring_things_into_view(page):
    data = timeline("mask_sync")
    fig = zoom_to_step(page, 50)
    t = float(data.to_x(data.step_t0[list(data.step_ids).index(50)]))
    assert fig["meta"]["x_range"][0] < t < fig["meta"]["x_range"][1]
    assert "plan" in page.inner_text("#range-table")       # the step's own statistics
    page.fill("#search", "masked_sample")
    page.press("#search", "Enter")
    page.wait_for_selector(".pt-hit", timeout=20_000)
    assert "masked_sample" in page.inner_text("#search-summary")
    page.locator(".pt-hit").first.click()
    page.wait_for_function("() => document.querySelector('#details-title') && "
                           "document.querySelector('#details-title').innerText.startsWith('masked_sample')",
                           timeout=20_000)
    page.get_by_text("Panels", exact=True).click()
    page.wait_for_selector("#bubble-table tbody tr")
    page.locator("#bubble-table tbody tr").nth(0).click()
    page.wait_for_function("() => document.querySelector('#details-title') && "
                           "document.querySelector('#details-title').innerText.startsWith('bubble: ')", timeout=20_000)
    assert page.locator("#timeline").is_visible()          # back on the timeline, the bubble selected
    top = report("mask_sync")
    costliest = max(top.bubbles, key=lambda b: b.duration_ns)
    fig = figure(page, "#timeline", until="f.shapes.some(s => s.name === 'selected')")
    assert fig["meta"]["x_range"][0] <= float(data.to_x(costliest.t0)) <= fig["meta"]["x_range"][1]


def test_the_overview_strip_shows_where_the_view_is_and_recentres_on_a_click(page):
    fig = zoom_to_step(page, 20)
    ov = figure(page, "#overview", until="f.shapes.some(s => s.name === 'view')")
    assert ov["meta"]["overview"]
    box = page.locator("#overview .nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.75, box["y"] + box["height"] * 0.5)
    moved = figure(page, "#timeline", until=f"f.meta.x_range[0] > {fig['meta']['x_range'][1]}")
    w0 = fig["meta"]["x_range"][1] - fig["meta"]["x_range"][0]
    assert moved["meta"]["x_range"][1] - moved["meta"]["x_range"][0] == pytest.approx(w0, rel=1e-6)


def test_the_trace_axis_matches_perfetto_timestamps_and_the_step_axis_labels_steps(page):
    page.get_by_text("time from trace start (Perfetto ts)").click()
    fig = figure(page, "#timeline", until="f.meta.axis === 'trace'")
    ev = [e for e in chrome_trace(sample("mask_sync"))["traceEvents"] if e.get("ph") == "X" and e["name"] == "forward"]
    assert fig["meta"]["x_range"][0] <= min(e["ts"] for e in ev) / 1e6 <= fig["meta"]["x_range"][1]
    assert all(t.endswith("s") for t in fig["ticks"])
    page.get_by_text("step", exact=True).click()
    fig = figure(page, "#timeline", until="f.meta.axis === 'step'")
    assert fig["ticks"] and all(t.isdigit() for t in fig["ticks"])
    assert set(fig["ticks"]) <= {str(s) for s in timeline("mask_sync").step_ids}


def test_legend_toggles_survive_zooming(page):
    page.locator("#timeline .legend .traces").filter(has_text="forward").first.click()
    figure(page, "#timeline", until="f.traces.some(t => t.name === 'forward' && t.visible === 'legendonly')")
    full = figure(page, "#timeline")
    lo, hi = full["meta"]["x_range"]
    relayout(page, "#timeline", lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.4)
    zoomed = figure(page, "#timeline", until=f"f.meta.x_range[0] > {lo + (hi - lo) * 0.29}")
    assert [t["visible"] for t in zoomed["traces"] if t["name"] == "forward"] == ["legendonly"]
    assert [t["visible"] for t in zoomed["traces"] if t["name"] == "sample"] == [True]


def test_the_requests_lane_and_the_analysis_window_are_explained_on_the_chart(page):
    fig = figure(page, "#timeline")
    assert fig["lanes"][-1] == "requests"
    assert {"requests: decoding", "requests: queued"} <= {t["name"] for t in fig["traces"]}
    notes = [a["text"] for a in fig["annotations"]]
    assert any("warm-up: outside the analysis window" in n for n in notes)
    assert any("drain: outside the analysis window" in n for n in notes)
    assert any(t["name"] == "accidental sync (outside window)" and t["n"] > 0 for t in fig["traces"])
    click_point(page, "#timeline", "requests (hover)", 150)
    page.wait_for_function("() => document.querySelector('#details-title') && "
                           "document.querySelector('#details-title').innerText.startsWith('requests in flight')",
                           timeout=20_000)
    assert "first token" in page.inner_text("#details-ops")


def test_the_requests_lane_marks_each_request_finished_or_aborted(pages, tmp_path):
    """A mark where each request ended (finalized, or aborted: an x), as many as the trace's
    requests that ended; clicking one shows that request's lifecycle and outlines it."""
    from helpers.loop_sim import SyntheticRun, synthetic_trace
    from photon_trace.telemetry.trace.file import write_trace
    tr = synthetic_trace(SyntheticRun(steps=60, requests=24, abort_every=4, seed=3))
    ends: dict[int, tuple[int, str]] = {}
    for r in tr.requests:
        if r.event in ("finalized", "aborted") and (r.req_id not in ends or r.t < ends[r.req_id][0]):
            ends[r.req_id] = (r.t, r.event)
    s = Server([write_trace(tr, tmp_path / "aborts.trace.jsonl")], [tmp_path])
    pg = pages.new(1600, 1100)
    try:
        pg.goto(s.url)
        fig = figure(pg, "#timeline")
        drawn = {t["name"]: t["n"] for t in fig["traces"]}
        assert drawn["requests: finished"] == sum(1 for _, k in ends.values() if k == "finalized") > 0
        assert drawn["requests: aborted"] == sum(1 for _, k in ends.values() if k == "aborted") > 0
        first_abort = min(t for t, k in ends.values() if k == "aborted")
        first = {f"request {r} · aborted" for r, (t, k) in ends.items() if t == first_abort and k == "aborted"}
        click_point(pg, "#timeline", "requests: aborted", 0)     # the earliest abort (or one ending with it)
        pg.wait_for_function("() => document.querySelector('#details-title') && "
                             "document.querySelector('#details-title').innerText.startsWith('request ')",
                             timeout=20_000)
        assert pg.inner_text("#details-title") in first
        assert "time to first token" in pg.inner_text("#details-fields")
        figure(pg, "#timeline", until="f.shapes.some(s => s.name === 'selected')")
    finally:
        pg.close()
        s.close()


def test_the_guided_first_view_on_the_engines_sync_trace(pages):
    """The demo's first screen: the flagged sync selected with its bubble and call site, the
    diagnosis row highlighted; host code's fix ranked above the device's dispatch latency."""
    if not ENGINE_SYNC_TRACE.exists():
        pytest.skip("traces/ has no engine sample (scripts/sample_traces.sh makes it)")
    loaded = TraceStore([ENGINE_SYNC_TRACE.parent]).get(ENGINE_SYNC_TRACE)
    top = ranked_diagnoses(loaded.report)[0]
    assert top.cause == "accidental_sync"
    s = Server([ENGINE_SYNC_TRACE, ENGINE_ASYNC_TRACE], [ENGINE_SYNC_TRACE.parent], guide=True)
    pg = pages.new(1500, 1000)
    try:
        pg.goto(s.url)
        fig = figure(pg, "#timeline", until="f.annotations.some(a => a.hovertext === 'idle it caused')")
        assert fig["meta"]["mode"] == "exact" and fig["meta"]["spans_visible"] < 400   # a few steps, not the run
        pg.wait_for_selector("#details-title", timeout=20_000)
        assert pg.inner_text("#details-title") == f"accidental sync · {top.site_or_phase}"
        assert "caused" in pg.inner_text("#details-related")
        row = pg.inner_text("#fix-first-table tr.pt-highlight")
        assert "accidental sync" in row and top.site_or_phase in row and "host code" in row
        rows = pg.inner_text("#fix-first-table tbody")
        if "device dispatch" in rows:
            assert rows.index("accidental sync") < rows.index("device dispatch")
        assert "async" in pg.inner_text("#trace-b")                  # the fixed run, ready to compare
    finally:
        pg.close()
        s.close()
