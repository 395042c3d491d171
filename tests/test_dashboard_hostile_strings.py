"""A trace's strings are shown as written, never as markup (issue 32, item 6): Plotly draws lane
labels, legends and hovers with a subset of HTML, so a thread named ``<a href>`` would become a
live link in its lane label and an op named ``<span style>`` 40 px red text. Checked on the
figures the page is sent, and in headless Chromium on what Plotly drew (no link, no styled
text: the names appear literally).
"""
from __future__ import annotations

import json
import os
from contextlib import closing

import pytest

from photon_trace.dashboard.timeline.data import prepare_timeline
from photon_trace.dashboard.timeline.figure import compare_figure, placeholder_figure, timeline_figure
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.file import write_trace
from photon_trace.telemetry.trace.records import DeviceSpan
from helpers.browser import CHROMIUM, HOVERS_ON, POINT_XY, Server, figure
from helpers.trace_builder import pipelined_trace

LINK = '<a href="https://evil.example/">evil lane</a>'
BIG = '<span style="font-size:40px;color:red">BIG</span>'
SITE = '<a href="https://evil.example/site">x.py:1</a><br><b>bold</b>'


def hostile_trace():
    """A clean pipelined run whose scheduler thread is named with a link, with an extra stream
    (named with a link) running ops named with styled text, and whose waits' sites and reasons
    hold markup."""
    tr = pipelined_trace(tokens=20)
    tr.host_spans = [h._replace(thread=LINK) for h in tr.host_spans]
    copies = [d for d in tr.device_spans if d.stream == "copy"]
    tr.device_spans += [DeviceSpan(LINK, BIG, d.step, d.slot, d.t0, d.t1, d.enqueued) for d in copies]
    tr.device_spans.sort(key=lambda d: (d.t0, d.t1))
    tr.waits = [w._replace(site=SITE, reason=BIG) for w in tr.waits]
    return tr


def rendered_strings(fig) -> list[str]:
    """Every string of a figure Plotly renders as text (labels, legend names, hovers, titles)."""
    out = []

    def walk(node, key=""):
        if isinstance(node, dict):
            for k, v in node.items():
                if k not in ("meta", "uid", "legendgroup", "customdata"):
                    walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in ("name", "text", "ticktext", "hovertext", "hovertemplate"):
            out.append(node)
    walk(json.loads(fig.to_json()))
    return out


def assert_no_trace_markup(strings: list[str]) -> None:
    joined = "\n".join(strings)
    for markup in ("<a ", "<span", "evil lane</a>"):
        assert markup not in joined, markup
    assert "&lt;a href=" in joined and "&lt;span style=" in joined


def test_the_figures_carry_trace_strings_as_text():
    tr = hostile_trace()
    data = prepare_timeline(tr, analyze(tr))
    fig = timeline_figure(data)
    strings = rendered_strings(fig)
    assert_no_trace_markup(strings)
    assert "host · &lt;a href=&quot;" not in " ".join(strings)          # quotes stay quotes
    assert any(s.startswith("host · &lt;a href=\"https://evil.example/\"&gt;") for s in fig.layout.yaxis.ticktext)
    # our own markup stays: the hover templates' bold and line breaks
    assert any("<b>%{meta}</b>" in s for s in strings)
    assert_no_trace_markup(rendered_strings(compare_figure(data, data, labels=(f"A · {LINK}", f"B · {BIG}"))))
    assert "<a " not in placeholder_figure(f"could not load {LINK}").layout.annotations[0].text


CHROMIUM_THERE = os.path.exists(CHROMIUM)


def hover_on(page, name: str) -> None:
    """Move the mouse onto a point of trace ``name`` until Plotly shows its hover label (Plotly
    hovers on mouse movement, and its hover trails the mouse)."""
    xy = page.evaluate(POINT_XY, ["#timeline", name, 0])
    assert xy, name
    for attempt in range(5):
        page.mouse.move(xy[0] - 25, xy[1] - 25)
        page.mouse.move(*xy, steps=5)
        try:
            page.wait_for_function(HOVERS_ON, arg=["#timeline", name], timeout=5_000)
            page.wait_for_selector("#timeline .hoverlayer .hovertext", timeout=5_000)
            return
        except Exception:
            if attempt == 4:
                raise


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM_THERE, reason=f"{CHROMIUM} is missing")
def test_in_the_browser_no_link_or_styled_text_comes_from_the_trace(pages, tmp_path):
    path = write_trace(hostile_trace(), tmp_path / "hostile.trace.jsonl")
    server = Server([path], [tmp_path])
    try:
        with closing(pages.new(1600, 1000)) as page:
            page.goto(server.url)
            fig = figure(page, "#timeline", timeout_ms=60_000)
            # what Plotly drew: the lane labels as text, no anchor, no 40 px text anywhere in the graph
            hover_on(page, "wait: expected (hover)")
            drawn = page.evaluate("""() => {
              const gd = document.querySelector('#timeline .js-plotly-plot');
              const big = [...gd.querySelectorAll('*')].filter(e => getComputedStyle(e).fontSize === '40px');
              return {links: gd.querySelectorAll('a').length, big: big.length,
                      labels: [...gd.querySelectorAll('.ytick text')].map(t => t.textContent),
                      legend: [...gd.querySelectorAll('.legendtext')].map(t => t.textContent),
                      hover: [...gd.querySelectorAll('.hoverlayer .hovertext')].map(t => t.textContent)};
            }""")
            # the tables arrive as markup the page sets (dashboard/raw_table.py): the ops' and
            # streams' names in them are text too
            page.get_by_text("Panels", exact=True).click()
            page.wait_for_selector("#device-ops-table", timeout=60_000)
            tables = page.evaluate("""() => {
              const box = document.querySelector('#panel-tables');
              const big = [...box.querySelectorAll('*')].filter(e => getComputedStyle(e).fontSize === '40px');
              return {links: box.querySelectorAll('a').length, big: big.length,
                      ops: [...document.querySelectorAll('#device-ops-table tbody tr')].map(r => r.cells[0].textContent),
                      lanes: [...document.querySelectorAll('#idle-views-table tbody tr')].map(r => r.cells[1].textContent)};
            }""")
    finally:
        server.close()
    assert drawn["links"] == 0 and drawn["big"] == 0, drawn
    assert any(lane.startswith("host · &lt;a href=") for lane in fig["lanes"])
    assert f"host · {LINK}" in drawn["labels"] and f"device · {LINK}" in drawn["labels"]
    assert any(BIG in text for text in drawn["legend"]), drawn["legend"]
    assert drawn["hover"] and SITE in drawn["hover"][0] and BIG in drawn["hover"][0], drawn["hover"]
    assert tables["links"] == 0 and tables["big"] == 0, tables
    assert BIG in tables["ops"] and LINK in tables["lanes"], tables


def test_the_perfetto_export_keeps_the_trace_strings_raw(tmp_path):
    """JSON for another viewer, which escapes as it shows: the names go out exactly as recorded."""
    from photon_trace.telemetry.export.perfetto import write_chrome_trace

    out = write_chrome_trace(hostile_trace(), tmp_path / "hostile.json")
    strings = set()

    def collect(node):
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            for v in node:
                collect(v)
        elif isinstance(node, str):
            strings.add(node)
    collect(json.loads(out.read_text())["traceEvents"])
    assert {LINK, BIG} <= strings and not any("&lt;" in v for v in strings)
