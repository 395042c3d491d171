"""Issue 33 item 1 in real Chromium: zoom and pan answered in the page (the server asked only
for data the view lacks), labels inside the spans wide enough for them, the ``?`` overlay, and
the time axis on screen however many lanes there are.

The keys' latency is measured in the page (``performance.now()`` from the keydown to the frame
after plotly moved the axis) and printed, never asserted: the machine these tests run on is
shared and loaded (standards: speed is measured, not asserted)."""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import pytest

from photon_trace.dashboard.sources.store import TraceStore
from helpers.browser import CHROMIUM, Server, figure

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")
DEMO = Path(__file__).resolve().parents[1] / "traces" / "tiny-point-s8-mask-sync-pipelined.trace.jsonl"
TRAINING = Path(__file__).parent / "data" / "kineto" / "trace_filter_sampled_rank-0.json.gz"
needs_demo = pytest.mark.skipif(not DEMO.exists(), reason="traces/ has no engine sample (scripts/sample_traces.sh)")

# Per keypress: ms from the keydown to the frame after plotly moved the axis (the first relayout
# after it), and the axis range then.
MEASURE = """() => {
  const gd = document.querySelector('#timeline .js-plotly-plot');
  window.__steps = []; window.__t0 = null;
  document.addEventListener('keydown', () => { window.__t0 = performance.now(); }, true);
  gd.on('plotly_relayout', () => {
    if (window.__t0 === null) return;
    const t0 = window.__t0; window.__t0 = null;
    requestAnimationFrame(() => window.__steps.push([performance.now() - t0, gd._fullLayout.xaxis.range.slice()]));
  });
}"""
# Every label on the timeline: its lines, box, whether CSS cut it short, and the screen extent
# of each drawn span (from the hover traces' start and duration) under its middle.
LABELS = """() => {
  const gd = document.querySelector('#timeline .js-plotly-plot');
  const fl = gd._fullLayout, xa = fl.xaxis, ya = fl.yaxis, box = gd.getBoundingClientRect();
  const plot = [box.left + xa._offset, box.top + ya._offset, box.left + xa._offset + xa._length,
                box.top + ya._offset + ya._length];
  const spans = [];
  for (const t of gd._fullData) {
    if (!t.name.endsWith('(hover)') || !t.customdata || !t.customdata.length || t.customdata[0].length !== 6) continue;
    for (let k = 0; k < t.x.length; k++) {
      const cd = t.customdata[k];
      spans.push({name: t.name.replace(' (hover)', ''), meta: t.meta, dur: cd[3],
                  x0: box.left + xa._offset + xa.l2p(cd[5]), x1: box.left + xa._offset + xa.l2p(cd[5] + cd[3]),
                  y: box.top + ya._offset + ya.l2p(t.y[k])});
    }
  }
  const labels = [...gd.querySelectorAll('.pt-label')].map(el => {
    const r = el.getBoundingClientRect();
    return {lines: [...el.children].map(c => c.textContent), left: r.left, right: r.right, top: r.top,
            bottom: r.bottom, cut: [...el.children].some(c => c.scrollWidth > c.clientWidth),
            overflow: getComputedStyle(el.children[0]).textOverflow};
  });
  return {plot, spans, labels};
}"""


@pytest.fixture(scope="module")
def demo_server():
    if not DEMO.exists():
        pytest.skip("traces/ has no engine sample")
    s = Server([DEMO], [DEMO.parent])
    yield s
    s.close()


@pytest.fixture
def demo(pages, demo_server):
    pg = pages.new(1600, 1000)
    pg.goto(demo_server.url)
    figure(pg, "#timeline", timeout_ms=60_000)
    yield pg
    pg.close()


def zoom_to_a_step(page) -> dict:
    data = TraceStore([DEMO.parent]).get(DEMO).timeline
    step = int(data.step_ids[len(data.step_ids) // 2])
    page.fill("#goto-step", str(step))
    page.press("#goto-step", "Enter")
    fig = figure(page, "#timeline", until="f.meta.mode === 'exact' && f.meta.spans_visible < 200")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")   # keys go to the page
    page.mouse.move(5, 5)                                                         # zoom about the centre
    return fig


@needs_demo
def test_keys_are_answered_in_the_page_and_the_server_is_asked_only_for_data_it_lacks(demo):
    asks: list[str] = []
    demo.on("request", lambda r: asks.append(r.post_data or "") if "_dash-update-component" in r.url else None)
    zoom_to_a_step(demo)
    demo.evaluate(MEASURE)

    def press(keys: str) -> list:
        start = len(demo.evaluate("window.__steps"))
        for n, k in enumerate(keys, 1):
            demo.keyboard.press(k)
            demo.wait_for_function(f"window.__steps.length >= {start + n}", timeout=30_000)
        return demo.evaluate("window.__steps")[start:]

    def zoom_asks() -> int:
        return sum('"id":"zoom-a"' in a for a in asks)

    before = zoom_asks()
    keys = "adadda"
    pans = press(keys)                          # within what was drawn either side of the view
    assert zoom_asks() == before, "a pan inside the drawn range went to the server"
    (lo, hi) = pans[0][1]
    w = hi - lo
    for (_, (a, b)), key in zip(pans[1:], keys[1:]):
        assert b - a == pytest.approx(w, rel=1e-6)
        assert a - lo == pytest.approx((0.2 if key == "d" else -0.2) * w, rel=1e-3)
        lo = a
    steps = press("wsadwsadwsadws")
    times = [t for t, _ in pans + steps]
    print(f"\nW/S/A/D: {len(times)} presses, median {statistics.median(times):.1f} ms a step "
          f"(min {min(times):.1f}, max {max(times):.1f}); server asked {zoom_asks() - before} times; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    assert zoom_asks() - before < len(steps)    # most steps need nothing new
    rng = demo.evaluate("() => document.querySelector('#timeline .js-plotly-plot')._fullLayout.xaxis.range")
    assert rng == pytest.approx(steps[-1][1])
    # zoomed in past twice the drawing's resolution, where spans were summed per pixel column
    # (the copy-backs): the server draws the finer view, and the page keeps the range it shows
    drawn_px = demo.evaluate("() => document.querySelector('#timeline .js-plotly-plot').layout.meta.px_s")
    asked = zoom_asks()
    last = press("www")[-1][1]
    assert zoom_asks() > asked
    fine = figure(demo, "#timeline", until=f"f.meta.px_s < {drawn_px} * 0.6")
    assert fine["range"] == pytest.approx(last)


@needs_demo
def test_a_drawing_landing_after_a_later_key_is_shown_at_the_later_view(demo):
    # The server's drawing for a pan past what was drawn is held back until a later press,
    # answered in the page (back inside what was drawn, so nothing newer supersedes it), has
    # moved the axis; then released. Without the page's guard (apply_zoom) plotly put the axis
    # back at the earlier press's range: the intermittent failure of the W test above.
    zoom_to_a_step(demo)
    demo.evaluate(MEASURE)
    held = []

    def hold_zooms(route):
        if '"id":"zoom-a"' in (route.request.post_data or ""):
            held.append(route)
        else:
            route.continue_()

    demo.route("**/_dash-update-component*", hold_zooms)
    needs = ("([a, b]) => window.ptTimeline.needsData("
             "document.querySelector('#timeline .js-plotly-plot').layout.meta, a, b)")
    start = len(demo.evaluate("window.__steps"))
    for n in range(1, 13):                  # pan right until the view leaves what was drawn
        demo.keyboard.press("d")
        demo.wait_for_function(f"window.__steps.length >= {start + n}", timeout=30_000)
        lo, hi = demo.evaluate("window.__steps")[-1][1]
        if demo.evaluate(needs, [lo, hi]):
            break
    else:
        pytest.fail("panning 2.4 widths never left what was drawn")
    deadline = time.monotonic() + 30
    while not held:                         # the zoom callback asks the server; held here
        assert time.monotonic() < deadline, "a pan past the drawing did not ask the server"
        demo.wait_for_timeout(20)
    back = [lo - 0.2 * (hi - lo), hi - 0.2 * (hi - lo)]
    assert not demo.evaluate(needs, back)
    demo.keyboard.press("a")                # back inside the drawing: answered in the page
    demo.wait_for_function(f"window.__steps.length >= {start + n + 1}", timeout=30_000)
    chosen = demo.evaluate("window.__steps")[-1][1]
    assert len(held) == 1
    held[0].continue_()
    demo.unroute("**/_dash-update-component*")
    fig = figure(demo, "#timeline", until=f"f.meta.data_range[1] > {chosen[1]} + 0.5 * ({chosen[1]} - {chosen[0]})")
    assert fig["range"] == pytest.approx(chosen)


@needs_demo
def test_spans_wide_enough_carry_their_name_and_duration_cut_with_an_ellipsis(demo):
    zoom_to_a_step(demo)
    demo.wait_for_selector("#timeline .pt-label")
    got = demo.evaluate(LABELS)
    x0, y0, x1, y1 = got["plot"]
    forwards = [s for s in got["spans"] if s["name"] == "forward"]
    labelled = [lb for lb in got["labels"] if lb["lines"][0] == "forward"]
    assert labelled and len(labelled) <= len(forwards)
    for lb in got["labels"]:
        assert x0 - 1 <= lb["left"] and lb["right"] <= x1 + 1 and y0 - 1 <= lb["top"] and lb["bottom"] <= y1 + 1
        assert lb["overflow"] == "ellipsis"
    for lb in labelled:   # inside a forward span, with that span's duration as the page's units write it
        mid = (lb["top"] + lb["bottom"]) / 2
        under = [s for s in forwards if s["x0"] - 1 <= lb["left"] and lb["right"] <= s["x1"] + 1 and abs(s["y"] - mid) < 20]
        assert len(under) == 1, lb
        ms = under[0]["dur"] * 1e3
        assert lb["lines"][1] == f"{float(f'{ms:.3g}'):g} ms"
    assert any(lb["cut"] for lb in got["labels"])               # a long name is cut short, with "…"
    # zoomed in the page, the labels follow the spans
    demo.keyboard.press("w")
    demo.wait_for_function("() => document.querySelector('#timeline .pt-label') !== null")
    again = demo.evaluate(LABELS)
    fwd = [lb for lb in again["labels"] if lb["lines"][0] == "forward"]
    width = lambda labels: statistics.median(lb["right"] - lb["left"] for lb in labels)   # noqa: E731
    assert fwd and width(fwd) > 1.2 * width(labelled)   # 1 / 0.7 wider, but for spans cut at the edges


@needs_demo
def test_question_mark_shows_the_keys_and_what_each_drawn_colour_means(demo):
    demo.mouse.move(5, 5)
    demo.keyboard.press("?")
    demo.wait_for_selector("#help-overlay", state="visible")
    text = demo.inner_text("#help-overlay")
    assert "W / S" in text and "A / D" in text and "zoom" in text and "pan" in text
    drawn = demo.evaluate("""() => Object.fromEntries(document.querySelector('#timeline .js-plotly-plot')._fullData
        .filter(t => t.showlegend).map(t => [t.name, t.fill === 'toself' ? t.fillcolor : t.marker.color]))""")
    rows = demo.evaluate("""() => [...document.querySelectorAll('#help-colours tr')].filter(r => r.style.display !== 'none')
        .map(r => [r.dataset.name, getComputedStyle(r.querySelector('.pt-swatch')).backgroundColor,
                   r.children[2].textContent])""")
    assert {name for name, _, _ in rows} == set(drawn)             # every legend entry, and only those
    for name, swatch, words in rows:
        assert words
        c = drawn[name].lstrip("#")
        assert swatch == f"rgb({int(c[0:2], 16)}, {int(c[2:4], 16)}, {int(c[4:6], 16)})"
    demo.keyboard.press("Escape")
    demo.wait_for_selector("#help-overlay", state="hidden")
    demo.click("#help-button")                                     # and for the mouse
    demo.wait_for_selector("#help-overlay", state="visible")
    demo.click("#help-close")
    demo.wait_for_selector("#help-overlay", state="hidden")


def test_a_call_stack_of_24_rows_keeps_its_time_axis_and_legend_words_on_screen(pages, tmp_path):
    s = Server([TRAINING], [TRAINING.parent])
    pg = pages.new(1600, 1000)
    try:
        pg.goto(s.url)
        fig = figure(pg, "#timeline", timeout_ms=90_000)
        assert len(fig["lanes"]) == 24 and fig["ticks"]
        boxes = pg.evaluate("""() => [...document.querySelectorAll('#timeline .xaxislayer-above .xtick text')]
            .map(t => { const r = t.getBoundingClientRect(); return [r.top, r.bottom]; })""")
        assert boxes and all(0 <= top and bottom <= 1000 for top, bottom in boxes)   # no scrolling needed
        legend = pg.evaluate("""() => document.querySelector('#timeline .js-plotly-plot')._fullData
            .filter(t => t.showlegend).map(t => t.name)""")
        assert "CPU op" in legend and not [n for n in legend if "_" in n]
    finally:
        pg.close()
        s.close()
