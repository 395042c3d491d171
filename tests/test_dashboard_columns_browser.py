"""The page in headless Chromium on a trace of over a million spans held as ``Columns``.

The trace is a real file (a simulated run repeated end to end, written in our format); the
server process reads it and hands the dashboard ``Columns``, as the columnar readers do.
While the dashboard prepares and draws the timeline, building a record tuple from those
columns fails the load (the analysis, not under test here, may still read records): so a
drawn page shows the timeline came from the arrays. What the page drew is read from plotly.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.browser import READ_FIGURE
from helpers.columns_trace import as_lists, tiled_trace
from helpers.waiting import wait_until
from photon_trace.telemetry.trace.file import write_trace

CHROMIUM = "/usr/bin/chromium"
SPANS = 1_000_000

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")

SERVE = """
import sys, threading
sys.path.insert(0, sys.argv[4])
from helpers.columns_trace import as_columns
from photon_trace.dashboard.app import create_app
from photon_trace.dashboard.sources import store as store_module
from photon_trace.dashboard.callbacks import timeline as callbacks
from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.importers import load_any

inside = threading.local()          # set while this thread prepares or draws the timeline
iterate, index = Columns.__iter__, Columns.__getitem__

def check():
    if getattr(inside, "on", 0):
        raise AssertionError("the timeline built a record tuple from Columns")

def no_tuples(fn):
    def run(*a, **k):
        inside.on = getattr(inside, "on", 0) + 1
        try:
            return fn(*a, **k)
        finally:
            inside.on -= 1
    return run

def guarded_iter(self):
    check()
    return iterate(self)

def guarded_index(self, i):
    if not isinstance(i, slice):
        check()
    return index(self, i)

Columns.__iter__, Columns.__getitem__ = guarded_iter, guarded_index
store_module.prepare_spans = no_tuples(store_module.prepare_spans)
callbacks.timeline_figure = no_tuples(callbacks.timeline_figure)
callbacks.overview_figure = no_tuples(callbacks.overview_figure)
store = store_module.TraceStore([sys.argv[2]], load=lambda p: as_columns(load_any(p)))
create_app([sys.argv[1]], [sys.argv[2]], None, store=store).run(host="127.0.0.1", port=int(sys.argv[3]))
"""

DRAWN_OR_FAILED = """() => {
  const err = document.querySelector('#load-error');
  if (err && err.innerText.trim()) return 'error: ' + err.innerText;
  const gd = document.querySelector('#timeline .js-plotly-plot');
  return gd && gd._fullData && gd._fullData.length && gd.layout.meta && gd.layout.meta.spans_total ? 'drawn' : null;
}"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    trace = tiled_trace(SPANS)
    path = write_trace(as_lists(trace), folder / "big.trace.jsonl")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tests = str(Path(__file__).parent)
    log = folder / "server.log"      # a file, not a pipe: werkzeug logs every request, and a full pipe blocks it
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", SERVE, str(path), str(folder), str(port), tests],
                                stdout=subprocess.DEVNULL, stderr=err)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            assert proc.poll() is None, log.read_text()[-2000:]
            return False
    try:
        wait_until(up, 60, "the dashboard's server to listen")
        yield f"http://127.0.0.1:{port}/", trace
    finally:
        proc.kill()
        proc.wait(10)


def test_a_million_span_columns_trace_opens_and_draws_per_pixel_column(served, pages):
    url, trace = served
    spans = len(trace.host_spans) + len(trace.device_spans) + len(trace.waits)
    page = pages.new(1500, 900)    # its server's own port: nothing of it is cached
    try:
        t0 = time.perf_counter()
        page.goto(url)
        state = page.wait_for_function(DRAWN_OR_FAILED, timeout=90_000).json_value()
        print(f"\n{spans:,} spans: page open to drawn timeline {time.perf_counter() - t0:.1f} s")
        assert state == "drawn", state
        fig = page.evaluate(READ_FIGURE, "#timeline")
    finally:
        page.close()
    meta = fig["meta"]
    assert meta["spans_total"] == spans > 1_000_000
    assert meta["mode"] == "aggregate" and meta["spans_visible"] == spans
    assert any("host" in lane for lane in fig["lanes"]) and any("compute" in lane for lane in fig["lanes"])
    filled = [t for t in fig["traces"] if t["polys"]]
    assert {"forward", "plan", "launch"} <= {t["name"] for t in filled}
    columns = meta["width_px"] * 3      # the view and a view's width either side (the pan margin)
    assert all(t["polys"] <= columns * len(fig["lanes"]) for t in filled)
    assert sum(t["n"] for t in fig["traces"]) < 0.05 * spans     # per pixel column, never per span
    assert fig["canvases"] > 0
