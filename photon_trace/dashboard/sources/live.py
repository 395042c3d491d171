"""Live mode: follow a trace that is still being written, and say honestly how fresh it is.

Two sources give records as they are flushed: a trace file being written
(``FileSource``: only the complete lines appended since the last read) and a
server's ``/v1/trace/recent`` (``HttpSource``: records after a cursor).
``LiveFollower`` polls one in a background thread, keeps the last few seconds
analysed, and knows:

* when the followed run is a *new* run (the server restarted: its header's run id
  changed or its cursor went backwards; the file was replaced or truncated), and
  then starts over instead of waiting for a cursor the new run will not reach for
  hours;
* when it last had data and last reached the source, so the page can say
  "unreachable" or "idle" with the time of the last data within two seconds;
* the views it drew lately (``snapshot``), so a user who zooms into one keeps it
  while following is paused.
"""
from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from photon_trace.dashboard.sources.openable import MAX_BYTES, NotOpenable, check_openable
from photon_trace.dashboard.sources.store import Loaded, LoadError, TraceStore, tail
from photon_trace.telemetry.trace.header import merge_header
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, RequestRecord, StepRecord, Trace

LIVE_SECONDS = 5.0
POLL_S = 0.5          # how often the source is read
STALE_S = 1.2         # no new records (or no answer) for this long: say so (+ a 0.5 s page tick: < 2 s)
PAUSED = "paused on your zoom or selection (▶ follow resumes)"
KEEP_VIEWS = 16       # recent analysed views kept for a paused page

_ROWS = {"host_spans": HostSpan, "device_spans": DeviceSpan, "waits": HostWait, "steps": StepRecord,
         "requests": RequestRecord}


def run_id(header: dict) -> tuple | None:
    """What tells one run from the next: when its header was made, and by which process."""
    made = header.get("created_wall_ns")
    pid = (header.get("host") or {}).get("pid") if isinstance(header.get("host"), dict) else None
    return None if made is None and pid is None else (made, pid)


class NewRun(Exception):
    """The source now belongs to another run; the reader has reset itself."""


class FileSource:
    """A trace file being written: the first read loads it whole (validated), later reads
    parse only the complete lines appended since (gzip files are re-read whole). A file
    replaced (another inode), truncated, or carrying another run id is a new run.

    It is opened as the page opens any file (``openable.check_openable``: a trace's
    suffix and header line, within the size limits ``limits``), before each whole read,
    and its size is checked before each append: ``NotOpenable`` says why, quoting nothing."""

    def __init__(self, path: str | os.PathLike, load: Callable[[Path], Trace], limits: dict | None = None):
        self.path = Path(path)
        self._load = load
        self._limits = limits or {}
        self._offset = 0
        self._trace: Trace | None = None
        self._stat: tuple[int, int, int] | None = None
        self._run: tuple | None = None
        self._fresh = False

    def read(self) -> Trace | None:
        """The trace so far, or None when nothing changed since the last read; raises
        ``NewRun`` (after resetting) when the file now holds another run."""
        if self._fresh:            # the new run found by the last read: hand it over whole
            self._fresh = False
            return self._trace
        st = self.path.stat()
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stat:
            return None
        replaced = self._stat is not None and (st.st_ino != self._stat[0] or st.st_size < self._offset)
        whole = self._trace is None or self.path.suffix == ".gz" or replaced
        limit = self._limits.get("max_bytes", MAX_BYTES)
        if whole:
            check_openable(self.path, **self._limits)
        elif st.st_size > limit:
            raise NotOpenable(f"{self.path.name}: {st.st_size} bytes, larger than the {limit} this dashboard opens")
        if whole:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._trace = self._load(self.path)
            self._offset = self._complete_lines_end()
        else:
            self._append_new_lines()
        self._stat = stamp
        new = run_id(self._trace.header)
        if self._run is not None and (replaced or new != self._run):
            self._run, self._fresh = new, True
            raise NewRun(f"{self.path.name} now holds a new run")
        self._run = new
        return self._trace

    def _complete_lines_end(self) -> int:
        with open(self.path, "rb") as f:
            data = f.read()
        return data.rfind(b"\n") + 1

    def _append_new_lines(self) -> None:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        for raw in data[:end].splitlines():
            obj = json.loads(raw)
            if "chunk" in obj:
                for kind, cls in _ROWS.items():
                    getattr(self._trace, kind).extend(cls(*r) for r in obj.get(kind, ()))
            elif "meta" in obj and isinstance(obj["meta"], dict):
                merge_header(self._trace.header, obj["meta"])
        self._offset += end

    def forget_before(self, t: int) -> None:
        """Nothing to drop: the file is re-read from disk, not kept growing in memory."""

    def current(self) -> Trace | None:
        return self._trace


LIVE_PATH = "/v1/trace/recent"


class HttpSource:
    """The server's live endpoint: ``GET URL?cursor=N`` answering JSON
    ``{"header": {...}, "cursor": M, "host_spans": [[...]], ...}`` with rows as in a
    trace file's chunk lines (records after cursor N). A bare server URL gets the
    server's ``/v1/trace/recent``; ``$PHOTON_TRACE_API_KEY`` is sent as a bearer token."""

    def __init__(self, url: str, timeout_s: float = STALE_S):
        from urllib.parse import urlsplit
        self.url = url.rstrip("/") + LIVE_PATH if urlsplit(url).path in ("", "/") else url
        self.timeout_s = timeout_s
        self.cursor = 0
        self._trace = Trace({})
        self._run: tuple | None = None
        key = os.environ.get("PHOTON_TRACE_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}

    def read(self) -> Trace | None:
        import httpx
        r = httpx.get(self.url, params={"cursor": self.cursor}, headers=self._headers, timeout=self.timeout_s)
        r.raise_for_status()
        body = r.json()
        header = body.get("header") or {}
        cursor = int(body.get("cursor", self.cursor))
        new = run_id(header)
        if (self._run is not None and new != self._run) or cursor < self.cursor:
            # Another run answers (the server restarted): its cursor starts again near 0.
            self._run, self.cursor, self._trace = new, 0, Trace({})
            raise NewRun(f"{self.url} answers for a new run")
        self._run = new
        self._trace.header.update(header)
        n = 0
        for kind, cls in _ROWS.items():
            rows = body.get(kind) or []
            getattr(self._trace, kind).extend(cls(*x) for x in rows)   # version-1 rows: -1 counters
            n += len(rows)
        self.cursor = cursor
        return self._trace if n or not self._trace.device_spans else None

    def forget_before(self, t: int) -> None:
        """Drop records that ended before ``t``: a live session must not grow without bound."""
        self._trace = tail(self._trace, t)


@dataclass(frozen=True, slots=True)
class LiveStatus:
    state: str            # waiting | live | idle | unreachable
    text: str
    stale: bool           # the numbers on screen are not current
    source_live: str = ""  # what ``paused`` says of a source that is live (``text`` says "following")

    def paused(self) -> str:
        """The line while the user holds a view (zoomed or selected): what the source is
        doing, never "following", which the page then is not."""
        return f"{PAUSED} · {self.source_live or self.text}"

    @property
    def colour(self) -> str:
        return {"live": "#1b7f3b", "idle": "#8a6d00", "unreachable": "#b00020"}.get(self.state, "#555")


def _clock(wall: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall)) if wall else "never"


class LiveFollower:
    """The last ``seconds`` of a running trace, re-analysed when new records arrive."""

    def __init__(self, source: str, store: TraceStore, seconds: float = LIVE_SECONDS,
                 clock: Callable[[], float] = time.time):
        self.source_name = source
        self.store = store
        self.seconds = seconds
        self.clock = clock
        self._path: Path | None = None
        if source.startswith(("http://", "https://")):
            self.source: FileSource | HttpSource = HttpSource(source)
            self.shown = source
        else:
            self._path = Path(source[len("file://"):] if source.startswith("file://") else source).expanduser()
            self.source = FileSource(self._path, store.load, store.limits)
            self.shown = self._path.name    # what the page says: never the file's absolute path
        self.current: Loaded | None = None
        self.version = 0          # bumped each time ``current`` is replaced
        self.error: str | None = None
        self.restarts = 0         # new runs seen since we started following
        self.last_data: float | None = None     # wall time new records last arrived
        self.last_contact: float | None = None  # wall time the source last answered
        self.error_since: float | None = None
        self._views: OrderedDict[int, Loaded] = OrderedDict()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, interval_s: float = POLL_S) -> None:
        """Poll in a background thread, so reading and analysing stay off the page's requests."""
        if self._thread is not None:
            return

        def loop():
            while not self._stop.is_set():
                self.poll()
                self._stop.wait(interval_s)
        self._thread = threading.Thread(target=loop, name="dashboard-live", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop polling (the app that owns this follower is shutting down)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def snapshot(self, version: int | None) -> Loaded | None:
        """The view drawn at ``version`` if it is still kept, else the current one."""
        with self._lock:
            return self._views.get(version, self.current) if version is not None else self.current

    def _fail(self, message: str) -> None:
        if self.error is None:
            self.error_since = self.clock()
        self.error = message

    def poll(self) -> Loaded | None:
        """The newest view (the previous one when nothing changed); keeps the last good one on errors."""
        with self._lock:
            try:
                try:
                    trace = self.source.read()
                except NewRun:
                    self._start_over()
                    trace = self.source.read()
            except FileNotFoundError:
                self._fail(f"waiting for {self.shown} to appear")
                return self.current
            except NewRun:
                return self.current
            except NotOpenable as e:
                self._fail(f"live source refused: {e}")
                return self.current
            except Exception as e:
                self._fail(self._public(f"live source {self.shown}: {type(e).__name__}: {e}"))
                return self.current
            self.last_contact = self.clock()
            if trace is None:
                if self.current is not None:   # reached, nothing new: the last view stands
                    self.error, self.error_since = None, None
                return self.current
            end = max([d.t1 for d in trace.device_spans[-256:]] + [s.t1 for s in trace.host_spans[-256:]] or [0])
            t_from = int(end - self.seconds * 1e9)
            recent = tail(trace, t_from - int(1e9))  # a second more, so the window's first step is whole
            self.source.forget_before(t_from - int(1e9))
            try:
                self.current = self.store.build(self.source_name, f"live: {self.shown}",
                                                lambda: recent, window=(t_from, end))
            except LoadError as e:
                self._fail(self._public(str(e)))
                return self.current
            self.version += 1
            self._views[self.version] = self.current
            while len(self._views) > KEEP_VIEWS:
                self._views.popitem(last=False)
            self.error, self.error_since = None, None
            self.last_data = self.clock()
            return self.current

    def _public(self, message: str) -> str:
        """``message`` with the followed file named as the page names it."""
        if self._path is not None:
            for form in sorted({str(self._path.resolve()), str(self._path), self.source_name}, key=len, reverse=True):
                message = message.replace(form, self.shown)
        return self.store.public(message)

    def _start_over(self) -> None:
        """A new run: drop the old one's view, so nothing of it is shown as current."""
        self.restarts += 1
        self.current = None
        self.version += 1
        self._views.clear()
        self.last_data = None

    def status(self, now: float | None = None) -> LiveStatus:
        """What the page says about freshness, from the times of the last data and contact."""
        now = self.clock() if now is None else now
        last = f"last data {_clock(self.last_data)}"
        restarted = f" · new run #{self.restarts + 1} since a restart" if self.restarts else ""
        if self.error and self.current is None and self.last_data is None and "waiting for" in self.error:
            return LiveStatus("waiting", f"live: {self.error}", True)
        if self.error:
            since = _clock(self.error_since)
            return LiveStatus("unreachable", f"unreachable since {since} ({self.error}); {last}{restarted}", True)
        if self.last_contact is None or now - self.last_contact > STALE_S:
            return LiveStatus("unreachable", f"no answer from {self.shown} since "
                                             f"{_clock(self.last_contact)}; {last}{restarted}", True)
        if self.current is None:
            return LiveStatus("waiting", f"live: reached {self.shown}, waiting for the first records"
                                         f"{restarted}", True)
        if self.last_data is None or now - self.last_data > STALE_S:
            return LiveStatus("idle", f"idle: {self.shown} is reachable but has no new records; {last}"
                                      f"{restarted}", True)
        return LiveStatus("live", f"live: following {self.shown} (last {self.seconds:.0f} s) · {last}"
                                  f"{restarted}", False, f"{self.shown} is live · {last}{restarted}")
