"""The docs' screenshots, taken in Chromium from the engine's own sample traces (traces/, made by
scripts/sample_traces.sh: the demo's runs); written to docs/ when PT_DOCS_SCREENSHOTS=1, else to
a temporary folder (the test then only checks that every view renders).

The page names its folders and typed paths relative to the server's working directory, so the
test works from the repository root (and from a scratch folder for the long trace): the images
show ``traces/...``, not the machine they were taken on."""
from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

import pytest

from photon_trace.telemetry.trace.file import write_trace
from helpers.browser import CHROMIUM, Server, click_point, figure, hover_first, open_as_a, relayout
from helpers.dashboard_samples import sample

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")
ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "traces"
NAMES = ("first-view", "timeline-zoomed", "panels", "compare", "long-trace")


def test_screenshots_of_the_main_views(pages, tmp_path, monkeypatch):
    sync = Path("traces/tiny-point-s8-mask-sync-pipelined.trace.jsonl")
    fixed = Path("traces/tiny-point-s8-mask-async-pipelined.trace.jsonl")
    blocking, pipelined = Path("traces/tiny-s8-blocking.trace.jsonl"), Path("traces/tiny-s8-pipelined.trace.jsonl")
    if not all((ROOT / p).exists() for p in (sync, fixed, blocking, pipelined)):
        pytest.skip("traces/ lacks the engine's sample traces (scripts/sample_traces.sh makes them)")
    out = ROOT / "docs" if os.environ.get("PT_DOCS_SCREENSHOTS") else tmp_path
    (tmp_path / "traces").mkdir()
    long_path = write_trace(sample("long"), tmp_path / "traces" / "long.trace.jsonl")
    monkeypatch.chdir(ROOT)
    server = Server([sync, fixed], [TRACES], guide=True)
    with closing(pages.new(1500, 1150)) as pg:
        try:
            pg.goto(server.url)
            # the demo's first screen: the flagged sync selected, its bubble linked, the diagnosis row lit
            figure(pg, "#timeline", until="f.annotations.some(a => a.hovertext === 'idle it caused')")
            pg.wait_for_selector("#details-title")
            pg.screenshot(path=str(out / "dashboard-first-view.png"), full_page=True)
            full = figure(pg, "#timeline")
            lo, hi = full["meta"]["x_range"]
            relayout(pg, "#timeline", lo + (hi - lo) * 0.2, lo + (hi - lo) * 0.8)
            figure(pg, "#timeline", until=f"f.range[0] > {lo + (hi - lo) * 0.1}")   # zoomed in the page
            click_point(pg, "#timeline", "forward (hover)", 2)
            pg.wait_for_function("() => document.querySelector('#details-title') && "
                                 "document.querySelector('#details-title').innerText.startsWith('forward')")
            figure(pg, "#timeline", until="f.annotations.some(a => a.hovertext === 'enqueued by')")
            hover_first(pg, "#timeline", "accidental sync")
            pg.screenshot(path=str(out / "dashboard-timeline-zoomed.png"), clip=pg.locator("#timeline").bounding_box())
            pg.mouse.move(5, 5)
            pg.get_by_text("Panels", exact=True).click()
            figure(pg, "#steps-fig")
            pg.wait_for_selector("#bubble-table")
            figure(pg, "#idle-breakdown")
            pg.screenshot(path=str(out / "dashboard-panels.png"), full_page=True)
            open_as_a(pg, blocking)
            pg.fill("#path-input", str(pipelined))
            pg.click("#open-b")
            pg.get_by_text("Compare", exact=True).click()
            # both traces analysed first: a deadline, not a speed (beside two CPU burners this
            # took over 30 s)
            figure(pg, "#compare-timeline", timeout_ms=120_000,
                   until="f.meta.labels && f.meta.labels[1].includes('pipelined') && f.meta.labels[0].includes('blocking')")
            pg.wait_for_selector("#cost-model-table")
            pg.screenshot(path=str(out / "dashboard-compare.png"), full_page=True)
            server.close()
            # the long trace from its own scratch folder, named there as traces/long.trace.jsonl
            monkeypatch.chdir(tmp_path)
            server = Server([long_path], [long_path.parent])
            pg.goto(server.url)
            figure(pg, "#timeline", timeout_ms=120_000, until="f.meta.mode === 'aggregate'")
            pg.screenshot(path=str(out / "dashboard-long-trace.png"))
        finally:
            server.close()
    for name in NAMES:
        assert (out / f"dashboard-{name}.png").stat().st_size > 10_000
