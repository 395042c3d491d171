"""Driving the dashboard in headless Chromium (Playwright): serving it, reading what plotly
drew, pointing at a drawn point.

Counts on the page are read from the plotted figure itself (``gd._fullData``: what plotly
drew), never from what the server meant to send.
"""
from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import threading
import time

from helpers.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# What plotly drew for one graph: meta, lane labels, and per trace its name, axis, point and polygon counts.
READ_FIGURE = """(sel) => {
  const gd = document.querySelector(sel + ' .js-plotly-plot');
  if (!gd || !gd._fullData || !gd.layout || !gd.layout.meta) return null;
  const polys = (x) => { let n = 0; for (let i = 0; i < x.length; i++) if (x[i] === null || Number.isNaN(x[i])) n++;
                         return x.length ? n + 1 : 0; };
  const fl = gd._fullLayout;
  return {meta: gd.layout.meta,
          lanes: (fl.yaxis.ticktext || []).slice(),
          lanes2: fl.yaxis2 ? (fl.yaxis2.ticktext || []).slice() : [],
          range: fl.xaxis ? fl.xaxis.range.slice() : null,
          ticks: [...gd.querySelectorAll('.xaxislayer-above .xtick text')].map(t => t.textContent),
          shapes: (fl.shapes || []).map(s => ({name: s.name || '', type: s.type})),
          annotations: (fl.annotations || []).map(a => ({text: a.text || '', name: a.name || '',
                                                        hovertext: a.hovertext || '', showarrow: a.showarrow})),
          canvases: gd.querySelectorAll('canvas').length,
          traces: gd._fullData.map(t => ({name: t.name, yaxis: t.yaxis, type: t.type, visible: t.visible,
                                          n: t.x ? t.x.length : 0, polys: t.fill === 'toself' ? polys(t.x) : 0}))};
}"""

# Screen coordinates of the ``i``-th point, among those inside the plotted x range, of the
# trace named ``name`` in graph ``sel``.
POINT_XY = """([sel, name, i]) => {
  const gd = document.querySelector(sel + ' .js-plotly-plot');
  const t = gd && gd._fullData.find(t => t.name === name);
  if (!t || !t.x || !t.x.length) return null;
  const xa = gd._fullLayout[(t.xaxis || 'x').replace('x', 'xaxis')];
  const ya = gd._fullLayout[(t.yaxis || 'y').replace('y', 'yaxis')];
  const [lo, hi] = xa.range;
  const inside = [];
  for (let k = 0; k < t.x.length; k++) if (t.x[k] >= lo && t.x[k] <= hi) inside.push(k);
  if (!inside.length) return null;
  const k = inside[Math.min(i, inside.length - 1)];
  const box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.l2p(t.x[k]), box.top + ya._offset + ya.l2p(t.y[k])];
}"""


def _shared_port() -> int:
    """A port below the kernel's range for outgoing connections (which could take it between
    two servers), free now: the one the suite's in-process servers take in turn."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    # each pytest-xdist worker ("gw0", "gw1", ...) its own: two taking one in turn could race
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
    free = (port for port in range(low - 1, max(1024, low - 2000), -97) if _listenable(port))
    return next(itertools.islice(free, worker, None), 0)


def _listenable(port: int) -> bool:
    """Whether a server could listen on ``port`` now (as werkzeug's does: its closed
    connections' TIME_WAIT do not stop it)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


SHARED_PORT = _shared_port()
"""Chromium caches a script, and V8's compilation of it, by its URL, port included: the servers
of the session take this port one after another (a second one alive at once gets another), so
``Pages`` loads the dashboard's scripts compiled."""


class Server:
    """``create_app(...)`` served by werkzeug on a loopback port, in a thread: ``SHARED_PORT``
    when it is free, else any."""

    def __init__(self, paths, allowed, live=None, **kw):
        from werkzeug.serving import make_server

        from photon_trace.dashboard.app import create_app
        self.app = create_app([str(p) for p in paths], [str(a) for a in allowed], live, **kw)
        port = SHARED_PORT if _listenable(SHARED_PORT) else 0     # werkzeug exits the process on a taken port
        self.httpd = make_server("127.0.0.1", port, self.app.server, threaded=True)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/"
        self.app_state = self.app.photon_trace_state
        # shutdown() waits for serve_forever's next poll: 0.5 s by default, at every close
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()     # the port is free for the next server at once
        self.thread.join(5)
        if self.app_state.follower is not None:   # its polling thread would take the GIL from later tests
            self.app_state.follower.stop()


class Pages:
    """New pages of the session's Chromium with a profile on disk (conftest's ``pages``)."""

    def __init__(self, context):
        self.context = context

    def new(self, width: int, height: int, scale: int = 1):
        """A new page of ``width`` x ``height`` CSS pixels, ``scale`` device pixels each (a
        high-DPI screen: the context's own factor is fixed at launch, so the page gets
        Chromium's device-metrics override); the caller closes it."""
        page = self.context.new_page()
        page.set_viewport_size({"width": width, "height": height})
        if scale != 1:
            self.context.new_cdp_session(page).send("Emulation.setDeviceMetricsOverride", {
                "width": width, "height": height, "deviceScaleFactor": scale, "mobile": False})
        return page


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """The dashboard in its own process, as ``photon-trace dashboard`` runs it (no GIL shared
    with the caller). ``started`` is when the process was launched."""

    def __init__(self, paths, allowed, timeout_s: float = 60, extra_env: dict | None = None):
        extra_env = extra_env or {}
        port = free_port()
        code = ("import sys; from photon_trace.dashboard.app import create_app; "
                "create_app(sys.argv[1].split(','), sys.argv[2].split(','), None)"
                ".run(host='127.0.0.1', port=int(sys.argv[3]), debug=False)")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-c", code, ",".join(map(str, paths)),
                                      ",".join(map(str, allowed)), str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **extra_env})
        self.url = f"http://127.0.0.1:{port}/"
        try:
            wait_until(lambda: _accepts(port), timeout_s, "the dashboard process accepting connections")
        except TimeoutError:
            self.close()
            raise

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


def figure(page, sel: str, timeout_ms: int = 30_000, until: str = "true", analysed: bool = True) -> dict:
    """Wait until graph ``sel`` has a drawn figure (and ``until``, a JS expression of ``f``);
    a timeline is waited for until it is drawn with its analysis (not the spans-only first draw)."""
    done = "f.meta.analysed !== false" if analysed else "true"
    page.wait_for_function(f"() => {{ const f = ({READ_FIGURE})('{sel}'); return f && {done} && ({until}); }}",
                           timeout=timeout_ms)
    return page.evaluate(READ_FIGURE, sel)


def open_as_a(page, path) -> None:
    """Open ``path`` as trace A from the path box and wait until A shows it, so the box can be
    reused: Dash reads the box when it sends the click's request, which a loaded browser may
    do after the next fill (A and B were then one file)."""
    page.fill("#path-input", str(path))
    page.click("#open-a")
    page.wait_for_function(f"() => document.querySelector('#trace-a').innerText.includes({path.name!r})",
                           timeout=30_000)


def polygons(fig, prefix: str, yaxis: str | None = None) -> int:
    return sum(t["polys"] for t in fig["traces"] if t["name"].startswith(prefix)
               and not t["name"].endswith("(hover)") and (yaxis is None or t["yaxis"] == yaxis))


def hover_points(fig, prefix: str, yaxis: str | None = None) -> int:
    return sum(t["n"] for t in fig["traces"] if t["name"].startswith(prefix) and t["name"].endswith("(hover)")
               and (yaxis is None or t["yaxis"] == yaxis))


def markers(fig, yaxis: str | None = None) -> int:
    return sum(t["n"] for t in fig["traces"] if t["name"] == "accidental sync"
               and (yaxis is None or t["yaxis"] == yaxis))


def relayout(page, sel: str, lo: float, hi: float) -> None:
    page.evaluate("([sel, a, b]) => Plotly.relayout(document.querySelector(sel + ' .js-plotly-plot'),"
                  " {'xaxis.range[0]': a, 'xaxis.range[1]': b})", [sel, lo, hi])


# Whether plotly's hover (what a click selects) is on a point of trace ``name`` in graph ``sel``.
HOVERS_ON = """([sel, name]) => { const gd = document.querySelector(sel + ' .js-plotly-plot');
  return !!gd && (gd._hoverdata || []).some(p => p.fullData && p.fullData.name === name); }"""


def click_point(page, sel: str, name: str, i: int = 0) -> None:
    """Click point ``i`` of trace ``name`` as a user would (plotly selects on a real click).
    plotly clicks what it hovers, and its hover trails the mouse: a click sent before the hover
    reached the point selected a neighbour a few pixels back along the way (a device op beside
    a bubble), so the click waits for the hover to be on this trace."""
    xy = page.evaluate(POINT_XY, [sel, name, i])
    assert xy, f"no point {i} of {name!r} in {sel}"
    page.mouse.move(xy[0] - 20, xy[1] - 20)
    page.mouse.move(*xy, steps=4)
    page.wait_for_function(HOVERS_ON, arg=[sel, name], timeout=10_000)
    page.mouse.click(*xy)


def hover_first(page, sel: str, trace_name: str) -> None:
    """Move the mouse onto a point of ``trace_name`` so its hover label shows."""
    xy = page.evaluate(POINT_XY, [sel, trace_name, 1])
    for _ in range(5 if xy else 0):
        page.mouse.move(xy[0] - 30, xy[1] - 30)
        page.mouse.move(*xy, steps=5)   # plotly hovers on mouse movement, not on a jump
        page.wait_for_timeout(500)
        if page.locator(f"{sel} .hoverlayer .hovertext").count():
            return
