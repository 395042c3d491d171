"""The dashboard on a distributed job and on a trace with long NCCL kernel names, in headless
Chromium (Playwright): a lane group per rank, the tables across ranks, and Panels tables that wrap
their cells rather than run over one another.

The job is HTA's two-rank trace_filter folder; what the page drew (lane labels, table rows and
their boxes on the screen) is compared with the job's analysis.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.browser import CHROMIUM, READ_FIGURE, Server
from photon_trace.telemetry.analysis.ranks import analyze_ranks
from photon_trace.telemetry.trace.importers.rank_files import load_ranks

DATA = Path(__file__).parent / "data" / "kineto"
RANKS = [DATA / "trace_filter_sampled_rank-0.json.gz", DATA / "trace_filter_sampled_rank-1.json.gz"]

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("traces") / "job"
    folder.mkdir()
    for p in RANKS:
        shutil.copy(p, folder / p.name)
    return folder


@pytest.fixture(scope="module")
def server(job):
    s = Server([job, RANKS[0]], [job.parent, DATA])
    yield s.url
    s.close()


@pytest.fixture(scope="module")
def page(pages):
    """A page of the session's Chromium (conftest's ``pages``)."""
    pg = pages.new(1500, 900)
    yield pg
    pg.close()


def drawn(page) -> dict:
    page.wait_for_function(f"() => {{ const f = ({READ_FIGURE})('#timeline'); "
                           f"return f !== null && f.meta.analysed !== false; }}", timeout=90_000)
    return page.evaluate(READ_FIGURE, "#timeline")


def test_a_job_draws_a_lane_group_per_rank_and_its_tables_across_ranks(server, page, job):
    rr = analyze_ranks(load_ranks([job]))
    page.goto(server)
    fig = drawn(page)
    # a call stack's deeper rows say only "depth k" (their thread is named on the row above)
    named = [label for label in fig["lanes"] if not label.startswith("depth ")]
    assert all(label.startswith("rank ") for label in named), named
    ranks = [int(label.split(" ")[1]) for label in named]
    assert ranks == sorted(ranks) and set(ranks) == {0, 1}          # rank 0's lanes, then rank 1's
    assert "rank 0 · device · gpu0 stream 7" in fig["lanes"] and "rank 1 · device · gpu1 stream 7" in fig["lanes"]
    assert page.inner_text("#summary-ranks") == "2"
    page.get_by_text("Panels", exact=True).click()
    page.wait_for_selector("#rank-table", timeout=90_000)
    rows = page.evaluate("() => [...document.querySelectorAll('#rank-table tbody tr')]"
                         ".map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText))")
    assert [r[0] for r in rows] == ["0", "1"]
    assert [r[5] for r in rows] == [f"{100 * x.overlap:.2f} %" for x in rr.ranks]
    steps = page.evaluate("() => [...document.querySelectorAll('#rank-step-table tbody tr')]"
                          ".map(tr => tr.querySelectorAll('td')[1].innerText)")
    assert steps == [str(s.slowest) for s in rr.steps]


def test_long_nccl_names_wrap_and_no_panels_table_runs_over_another(server, page):
    page.goto(server)
    drawn(page)
    page.fill("#path-input", str(RANKS[0]))
    page.click("#open-a")
    page.wait_for_function(f"() => document.querySelector('#trace-a').innerText.includes({RANKS[0].name!r})",
                           timeout=30_000)
    drawn(page)
    page.get_by_text("Panels", exact=True).click()
    page.wait_for_selector("#diagnosis-table", timeout=90_000)
    page.wait_for_selector("#bubble-table", timeout=90_000)
    assert "ncclKernel_SendRecv" in page.inner_text("#diagnosis-table")     # the long names are there
    boxes = page.evaluate("""() => ['#diagnosis-table', '#bubble-table', '#sync-table', '#cause-table',
                                    '#idle-views-table'].map(s => { const e = document.querySelector(s);
        if (!e || e.tagName !== 'TABLE') return null; const r = e.getBoundingClientRect();
        return {sel: s, left: r.left, right: r.right, top: r.top, bottom: r.bottom,
                over: e.scrollWidth - e.parentElement.clientWidth}; }).filter(x => x)""")
    assert len(boxes) >= 2
    for b in boxes:
        assert b["over"] <= 1, b          # no table is wider than the column it sits in
    diag, bubbles = boxes[0], boxes[1]
    apart = diag["right"] <= bubbles["left"] or bubbles["right"] <= diag["left"] or \
        diag["bottom"] <= bubbles["top"] or bubbles["bottom"] <= diag["top"]
    assert apart, (diag, bubbles)
