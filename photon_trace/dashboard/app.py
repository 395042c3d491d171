"""The Dash app: a thin layout (``layout.py``) and callbacks (``callbacks/``) over the pure
figure builders (``timeline/``, ``panels/``) and the trace sources (``sources/``).

``create_app`` builds everything; importing this module registers nothing.
"""
from __future__ import annotations

import time
from pathlib import Path

import dash

from photon_trace.dashboard.host_guard import HostGuard
from photon_trace.dashboard.layout import page
from photon_trace.dashboard.sources.openable import RANKS_PREFIX
from photon_trace.dashboard.sources.live import LiveFollower
from photon_trace.dashboard.sources.store import Loaded, LoadError, PathRefused, TraceStore
from photon_trace.hosts import LOOPBACK_HOSTS

LIVE = "live"


class AppState:
    """What the callbacks share: the store, the live follower, the traces named at start."""

    def __init__(self, store: TraceStore, follower: LiveFollower | None, live: str | None,
                 initial: list[str], guide: bool):
        self.store, self.follower, self.live, self.initial, self.guide = store, follower, live, initial, guide
        # per page (follow-state's "page"): when a zoom or a selection last paused following
        # (time.monotonic()) and the zoom's nonce (its page time). A live re-draw asked for
        # before either would move the user's view away when it lands after it.
        self.live_pauses: dict[str, tuple[float, int]] = {}

    def pause_live(self, follow: dict | None, zoom_nonce: int = 0) -> None:
        page = (follow or {}).get("page")
        if page is None:
            return
        _, seen = self.live_pauses.pop(page, (0.0, 0))
        self.live_pauses[page] = (time.monotonic(), max(seen, zoom_nonce))
        while len(self.live_pauses) > 256:      # pages long closed
            self.live_pauses.pop(next(iter(self.live_pauses)))

    def live_redraw_is_stale(self, follow: dict | None, zoom: dict | None, asked: float) -> bool:
        """A live re-draw asked for (server time ``asked``, page state ``zoom``) before the
        page's last zoom or selection paused following."""
        at, nonce = self.live_pauses.get((follow or {}).get("page"), (0.0, 0))
        return at > asked or (zoom or {}).get("nonce", 0) < nonce

    def options(self, extra: list[str] = ()) -> list[dict]:
        seen, out = set(), []
        if self.follower:
            out.append({"label": f"● live: {self.follower.shown}", "value": LIVE})
        for p in [*extra, *self.initial, *(str(x) for x in self.store.listing())]:
            if p not in seen:
                seen.add(p)
                out.append({"label": self.store.shown(p), "value": p})
        return out

    def peek(self, path: str | None, wait_s: float = 0.0) -> tuple[Loaded | None, str | None]:
        """The trace (maybe still partial: spans drawn, analysis running), or None with no error
        while it loads (after waiting up to ``wait_s`` for its spans), or None and the reason it
        cannot be shown."""
        if not path:
            return None, "no trace selected: pick one above or open a path"
        try:
            return self.store.peek(path, wait_s), None
        except (PathRefused, LoadError) as e:
            return None, str(e)

    def get(self, path: str | None, version: int | None = None) -> tuple[Loaded | None, str | None]:
        """The loaded trace for ``path`` (for live: the view drawn at ``version``, if kept)."""
        if not path:
            return None, "no trace selected: pick one above or open a path"
        if path == LIVE and self.follower:
            loaded = self.follower.snapshot(version)
            if loaded is None:
                return None, self.follower.error or "waiting for the first records"
            return loaded, None
        try:
            return self.store.get(path), None
        except (PathRefused, LoadError) as e:
            return None, str(e)


def create_app(paths: list[str], allowed_dirs: list[str], live: str | None,
               *, store: TraceStore | None = None, guide: bool = False,
               allowed_hosts: frozenset[str] | set[str] = LOOPBACK_HOSTS) -> dash.Dash:
    """The dashboard over ``paths`` (the first shown, the second offered for comparison),
    opening only files inside ``allowed_dirs``; ``live`` follows a trace being written
    (a file path, or the server's live URL); ``guide`` opens on the first thing to fix
    (the top host-fixable diagnosis row's first occurrence, selected and in view).
    It answers only requests whose ``Host`` is one of ``allowed_hosts`` (``host_guard.py``)."""
    from photon_trace.dashboard.callbacks import live as live_callbacks
    from photon_trace.dashboard.callbacks import panels as panel_callbacks
    from photon_trace.dashboard.callbacks import select as select_callbacks
    from photon_trace.dashboard.callbacks import timeline as timeline_callbacks

    store = store or TraceStore(allowed_dirs)
    follower = LiveFollower(live, store) if live else None
    if follower:
        follower.start()
    initial = [p if str(p).startswith(RANKS_PREFIX) else str(Path(p).expanduser().resolve()) for p in paths]
    store.preload(initial[:2])
    state = AppState(store, follower, live, initial, guide)
    app = dash.Dash(__name__, title="photon_trace dashboard", update_title=None,
                    suppress_callback_exceptions=True)
    # plotly.js (4.6 MB) loads with the page's other scripts and runs before the renderer starts,
    # rather than being fetched when the first graph mounts (after the layout arrived): its
    # download and its ~1 s of parsing in a software-rendered browser overlap the trace's load
    # instead of following it. The graphs find it as window.Plotly and fetch nothing more.
    app.config.external_scripts.append(
        f"{app.config.requests_pathname_prefix}_dash-component-suites/plotly/package_data/plotly.min.js")

    def layout():
        a = LIVE if follower else (initial[0] if initial else None)
        b = initial[1] if len(initial) > 1 else (initial[0] if follower and initial else None)
        return page(store, live, follower, state.options(), a, b)

    app.layout = layout
    app.server.wsgi_app = HostGuard(app.server.wsgi_app, allowed_hosts)
    app.photon_trace_state = state   # the store and live follower, for whoever embeds the app
    for module in (timeline_callbacks, select_callbacks, live_callbacks, panel_callbacks):
        module.register(app, state)
    return app
