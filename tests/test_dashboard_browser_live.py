"""Live mode in real Chromium against the real server (``photon_trace.server`` with a tiny
engine, its ``/v1/trace/recent``): a restart is followed from the new run, a dead or idle
server is said to be so with the time of its last data, and a zoomed view stays put.

Waits are on page state with deadlines, never on sleeps; the two-second freshness bound
is by construction (``POLL_S + STALE_S``, unit-tested with a clock in
``test_dashboard_live.py``) and the latency seen here is printed, not asserted.
"""
from __future__ import annotations

import os
import threading
import time

import httpx
import pytest

from photon_trace.dashboard.sources.live import STALE_S
from photon_trace.engine.engine import Engine
from helpers.browser import CHROMIUM, Server, figure, free_port, relayout
from helpers.engine_helpers import TINY
from helpers.serving import ServerThread

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
pytest.importorskip("playwright.sync_api")


def engine_server(port: int) -> ServerThread:
    from photon_trace.server.api import create_app
    return ServerThread(create_app(lambda tracer: Engine(tracer=tracer, **TINY), model_name="tiny"), port=port).start()


class Load:
    """Completions sent one after another until stopped, so the engine keeps recording."""

    def __init__(self, url: str):
        self.url, self.stop_event = url, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_event.is_set():
            try:
                httpx.post(self.url + "/v1/completions", json={"model": "tiny", "prompt": "hello there",
                                                               "max_tokens": 48}, timeout=30)
            except httpx.HTTPError:
                self.stop_event.wait(0.05)   # the server is gone or restarting: try again soon

    def stop(self):
        self.stop_event.set()
        self.thread.join(60)


def status(page) -> str:
    return page.inner_text("#live-status")


def wait_status(page, text: str, timeout_ms: int = 30_000, start: bool = False) -> float:
    """Wait until the freshness line contains ``text`` (begins with it, when ``start``)."""
    t0 = time.perf_counter()
    test = "startsWith" if start else "includes"
    page.wait_for_function(f"() => document.querySelector('#live-status').innerText.{test}({text!r})",
                           timeout=timeout_ms)
    return time.perf_counter() - t0


def following(pages, tmp_path, srv: ServerThread, port: int) -> dict:
    """Load on ``srv``, the dashboard following it, and a page on the dashboard."""
    load = Load(srv.url)
    dash = Server([], [tmp_path], live=srv.url)
    pg = pages.new(1500, 1000)
    pg.goto(dash.url)
    figure(pg, "#timeline", timeout_ms=60_000, until="f.meta.spans_total > 0")
    return {"srv": srv, "load": load, "dash": dash, "port": port, "page": pg}


def stop_following(state: dict) -> None:
    state["load"].stop()
    state["page"].close()
    state["dash"].close()


@pytest.fixture
def live(pages, tmp_path):
    """An engine server of its own under load (the test may stop or replace it), the dashboard
    following it, and a page on the dashboard."""
    port = free_port()
    state = following(pages, tmp_path, engine_server(port), port)
    yield state
    stop_following(state)
    state["srv"].stop()


@pytest.fixture(scope="module")
def kept_server():
    """An engine server for the tests that leave it running (each brings its own load and
    dashboard): it sits idle between them, so it costs the module's other tests nothing."""
    port = free_port()
    srv = engine_server(port)
    yield srv, port
    srv.stop()


@pytest.fixture
def live_kept(pages, tmp_path, kept_server):
    """As ``live``, on the module's engine server (which the test must not stop)."""
    state = following(pages, tmp_path, *kept_server)
    yield state
    stop_following(state)


def test_a_restarted_server_is_followed_from_its_new_run(live):
    pg, follower = live["page"], live["dash"].app_state.follower
    wait_status(pg, "live: following")
    first = follower.current.trace.header["created_wall_ns"]
    live["load"].stop()
    live["srv"].stop()
    wait_status(pg, "unreachable")
    live["srv"] = engine_server(live["port"])          # the same address, a new run
    live["load"] = Load(live["srv"].url)
    wait_status(pg, "new run", timeout_ms=60_000)
    wait_status(pg, "live: following", timeout_ms=60_000)
    assert "ConnectError" not in status(pg) and follower.restarts == 1
    assert follower.current.trace.header["created_wall_ns"] != first
    fig = figure(pg, "#timeline", until="f.meta.spans_total > 0")
    assert fig["meta"]["spans_total"] > 0
    assert pg.locator("#load-error .pt-error").count() == 0, pg.inner_text("#load-error")


def test_an_idle_then_dead_server_is_shown_stale_with_the_time_of_its_last_data(live):
    pg, follower = live["page"], live["dash"].app_state.follower
    # following and not greyed out, read together (a loaded machine can stall the load's data
    # past the stale limit between two separate reads)
    pg.wait_for_function("() => document.querySelector('#live-status').innerText.includes('live: following') && "
                         "!document.querySelector('#summary').className.includes('pt-stale')", timeout=30_000)
    live["load"].stop()                                 # reachable, nothing new
    # idle, reachable and the time of the last data, read together: the recorder's last flush
    # (the final request's records, the engine's sleep) is new data, and beside two CPU burners
    # it landed after "idle" first showed, which then read "following" again
    pg.wait_for_function("() => { const s = document.querySelector('#live-status').innerText; "
                         "return s.includes('idle:') && s.includes('reachable') && s.includes('last data'); }",
                         timeout=30_000)
    idle_after = time.time() - follower.last_data
    pg.wait_for_function("() => document.querySelector('#summary').className.includes('pt-stale')")
    t_dead = time.time()
    stopper = threading.Thread(target=live["srv"].stop)  # gone (shutting down takes a while: time it from the start)
    stopper.start()
    wait_status(pg, "unreachable")
    t_unreachable = time.time()
    dead_after = t_unreachable - t_dead
    stopper.join(60)
    last = follower.last_data
    # the server's shutdown flushes what its recorder still holds (the idle time as no-work
    # spans), which a poll can read before the socket closes (beside two CPU burners: 0.26 s
    # after t_dead): new data up to the moment the page says unreachable, never after
    assert last is not None and last <= t_unreachable
    assert time.strftime("%H:%M:%S", time.localtime(last)) in status(pg)
    assert "pt-stale" in pg.get_attribute("#summary", "class")
    print(f"\n'idle' shown {idle_after:.2f} s after the last data arrived; 'unreachable' {dead_after:.2f} s after "
          f"the server began to stop (page tick 0.5 s, poll 0.5 s, stale after {STALE_S} s)")


def test_zooming_in_live_mode_pauses_following_until_follow(live_kept):
    pg, follower = live_kept["page"], live_kept["dash"].app_state.follower
    fig = figure(pg, "#timeline")
    lo, hi = fig["meta"]["x_range"]
    a, b = lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.4
    relayout(pg, "#timeline", a, b)
    figure(pg, "#timeline", until=f"Math.abs(f.meta.x_range[0] - {a}) < 1e-9")
    wait_status(pg, "paused", start=True)
    assert pg.locator("#follow").is_visible()
    seen = follower.version
    deadline = time.monotonic() + 30
    while follower.version < seen + 3 and time.monotonic() < deadline:   # new data keeps arriving ...
        pg.wait_for_timeout(200)
    assert follower.version >= seen + 3
    kept = figure(pg, "#timeline")
    assert kept["range"] == pytest.approx([a, b]) and kept["meta"]["x_range"] == pytest.approx([a, b])   # ... the view stays
    pg.click("#follow")
    resumed = figure(pg, "#timeline", until=f"Math.abs(f.range[0] - {a}) > 1e-6")
    assert resumed["range"][1] - resumed["range"][0] > (b - a) * 2
    wait_status(pg, "live: following", start=True)     # not "paused (...): live: following"
    assert not pg.locator("#follow").is_visible()


def test_a_live_redraw_landing_after_a_zoom_leaves_the_view_where_the_user_put_it(live_kept):
    """The race behind the test above's old flake, forced: live re-draws pass the server's
    staleness check before the zoom's pause reaches the server (held there, then let go), and
    land after the zoom's figure. The page drops them (``apply_live``, dashboard/assets/clientside.js);
    the summary still updates."""
    pg, state = live_kept["page"], live_kept["dash"].app_state
    figure(pg, "#timeline")
    held, release = threading.Event(), threading.Event()
    real_check = state.live_redraw_is_stale

    def checked_before_the_pause(follow, zoom, asked):
        held.set()
        release.wait(60)
        return False

    state.live_redraw_is_stale = checked_before_the_pause   # an instance attribute: del restores the method
    try:
        assert held.wait(30), "no live re-draw was asked for"
        lo, hi = figure(pg, "#timeline")["meta"]["x_range"]
        a, b = lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.4
        relayout(pg, "#timeline", a, b)
        figure(pg, "#timeline", until=f"Math.abs(f.meta.x_range[0] - {a}) < 1e-9")
        wait_status(pg, "paused", start=True)
    finally:
        release.set()
        del state.live_redraw_is_stale
    assert state.live_redraw_is_stale == real_check
    # every held response has landed once no callback writing the summary is in flight
    pg.wait_for_function("() => !document.querySelector('#summary[data-dash-is-loading]')", timeout=30_000)
    kept = figure(pg, "#timeline")
    assert kept["range"] == pytest.approx([a, b]) and kept["meta"]["x_range"] == pytest.approx([a, b])
