"""The dashboard on real Nsight Systems exports, in headless Chromium (Playwright).

What the page drew (``gd._fullData`` for the timeline, the tables' text for the panels) is
compared with the analysis of the imported export: lanes, bubbles and syncs on the timeline;
both idle views and nsys analyze's rules in the panels.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.browser import CHROMIUM, READ_FIGURE, Server, hover_points, markers
from photon_trace.dashboard.panels.figures import fmt_duration
from photon_trace.telemetry.analysis import analyze, expert_rules
from photon_trace.telemetry.trace.importers import load_any


DATA = Path(__file__).parent / "data" / "nsys"
SAXPY = DATA / "pipit_saxpy0.sqlite.gz"
FUSER = DATA / "fuser_report1.sqlite.gz"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def server():
    s = Server([SAXPY, FUSER], [DATA])
    yield s.url
    s.close()


@pytest.fixture(scope="module")
def page(pages):
    """A page of the session's Chromium (conftest's ``pages``)."""
    pg = pages.new(1500, 900)
    yield pg
    pg.close()


def drawn(page) -> dict:
    """The timeline once drawn with its analysis (``meta.analysed`` is false on the first, spans-only draw)."""
    page.wait_for_function(f"() => {{ const f = ({READ_FIGURE})('#timeline'); "
                           f"return f !== null && f.meta.analysed !== false; }}", timeout=60_000)
    return page.evaluate(READ_FIGURE, "#timeline")


def test_an_nsys_export_draws_its_lanes_bubbles_and_syncs(server, page):
    trace = load_any(SAXPY)
    report = analyze(trace)
    page.goto(server)
    fig = drawn(page)
    # the host thread as a call stack (issue 33): an NVTX range over the runtime calls in it
    assert fig["lanes"] == ["host · thread 1230493 (MPI Rank 0)", "depth 1", "device · gpu0 stream 7"]
    assert hover_points(fig, "bubble: ") == len(report.bubbles) > 0    # one hover point per bubble
    assert {"kernel", "memory copy", "CUDA runtime", "NVTX range"} <= {t["name"] for t in fig["traces"]}
    assert markers(fig) == len(trace.waits) == 15


def test_the_panels_show_both_idle_views_and_nsys_rules(server, page):
    trace = load_any(FUSER)
    report = analyze(trace)
    rules = expert_rules(trace)
    page.goto(server)
    drawn(page)
    page.fill("#path-input", str(FUSER))
    page.click("#open-a")
    page.wait_for_function(f"() => {{ const f = ({READ_FIGURE})('#timeline'); "
                           f"return f && f.lanes.some(l => l.includes('pid 50922')); }}", timeout=60_000)
    page.get_by_text("Panels", exact=True).click()
    page.wait_for_selector("#rules-table", timeout=60_000)
    views = page.inner_text("#idle-views-table")
    (stream,), (device,) = report.streams, report.devices
    assert "per stream (ours)" in views and "Nsight's" in views
    assert f"{100 * stream.idle_fraction:.1f} %" in views and fmt_duration(device.idle_ns) in views
    shown = page.evaluate("() => [...document.querySelectorAll('#rules-table tbody tr')]"
                          ".map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText))")
    assert [(r[0], r[2]) for r in shown] == [(r.name, f"{r.count:,}") for r in rules]
    gaps = page.evaluate("() => [...document.querySelectorAll('#rule-gpu_gaps tbody tr')].length")
    assert gaps == 3
    heads = page.evaluate("() => [...document.querySelectorAll('#idle-views-table th, #rules-table th')]"
                          ".map(e => e.title)")
    assert heads and all(heads)    # every column says what it means
