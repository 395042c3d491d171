"""Where the dashboard's traces come from: allowed folders, a cache, and live following.

Nothing here draws. ``TraceStore`` loads and analyses a file once per version
of it (path, mtime, size) and keeps what the figures need; ``LiveFollower``
keeps the last few seconds of a trace that is still being written.
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
from typing import Any, Callable

from photon_trace.dashboard.openable import TRACE_SUFFIXES, NotOpenable, check_openable
from photon_trace.dashboard.timeline import TimelineData, prepare_timeline
from photon_trace.telemetry.records import DeviceSpan, HostSpan, HostWait, RequestRecord, StepRecord, Trace
from photon_trace.telemetry.sinks import merge_header

LIVE_SECONDS = 5.0

_ROWS = {"host_spans": HostSpan, "device_spans": DeviceSpan, "waits": HostWait, "steps": StepRecord,
         "requests": RequestRecord}


class PathRefused(Exception):
    """A path outside the folders the dashboard may read."""


class LoadError(Exception):
    """A trace that could not be read or analysed; the message is shown in the page."""


@dataclass(slots=True)
class Loaded:
    """One trace, analysed, with its timeline arrays."""
    path: str
    label: str
    trace: Trace
    report: Any
    timeline: TimelineData
    notes: list[str]


def _analysis():
    from photon_trace.telemetry.analysis import analyze, cost_model
    return analyze, cost_model


def _loader():
    from functools import partial

    from photon_trace.telemetry.importers import load_any
    # A damaged profiler trace is shown as far as it is valid; its warnings become the page's notes.
    return partial(load_any, strict=False)


def is_inside(path: str | os.PathLike, allowed_dirs: list[Path]) -> Path:
    """``path`` resolved (symlinks, ``..``) if it lies in one of ``allowed_dirs``; else ``PathRefused``."""
    if "\x00" in str(path):
        raise PathRefused("refused: the path contains a NUL byte")
    p = Path(path).expanduser().resolve()
    for d in allowed_dirs:
        if p == d or p.is_relative_to(d):
            return p
    raise PathRefused(f"refused: {path} is outside the folders this dashboard may open "
                      f"({', '.join(str(d) for d in allowed_dirs)})")


def list_traces(allowed_dirs: list[Path], limit: int = 200) -> list[Path]:
    """Trace files in the allowed folders (and one level below), newest first."""
    found: dict[Path, float] = {}
    for d in allowed_dirs:
        if not d.is_dir():
            continue
        for pattern in ("*", "*/*"):
            for p in d.glob(pattern):
                if p.is_file() and p.name.endswith(TRACE_SUFFIXES):
                    try:
                        found[p.resolve()] = p.stat().st_mtime
                    except OSError:
                        pass
    return sorted(found, key=lambda p: -found[p])[:limit]


def newest_traces(folder: Path, n: int = 2) -> list[Path]:
    return list_traces([folder.resolve()])[:n]


def tail(trace: Trace, t_from: int) -> Trace:
    """The records of ``trace`` that end at or after ``t_from`` (same header); step records
    from the first step still on the device (the step records carry no time)."""
    device = [d for d in trace.device_spans if d.t1 >= t_from]
    first_step = min((d.step for d in device), default=None)
    return Trace(trace.header,
                 [s for s in trace.host_spans if s.t1 >= t_from], device,
                 [w for w in trace.waits if w.t1 >= t_from],
                 [r for r in trace.steps if first_step is None or r.step >= first_step],
                 [r for r in trace.requests if r.t >= t_from])


def _extent_end(trace: Trace) -> int:
    ends = [d.t1 for d in trace.device_spans[-256:]] + [s.t1 for s in trace.host_spans[-256:]]
    return max(ends) if ends else 0


class TraceStore:
    """Load-and-analyse with a small cache; every failure becomes a ``LoadError`` message."""

    def __init__(self, allowed_dirs: list[str | os.PathLike], *, load: Callable | None = None,
                 analyze: Callable | None = None, cost_model: Callable | None = None, max_entries: int = 6,
                 limits: dict | None = None):
        self.allowed = [Path(d).expanduser().resolve() for d in allowed_dirs]
        self.limits = limits or {}   # check_openable's max_bytes / max_decompressed_bytes
        default_analyze, default_cost = _analysis() if analyze is None or cost_model is None else (None, None)
        self.load = load or _loader()
        self.analyze = analyze or default_analyze
        self.cost_model = cost_model or default_cost
        self._cache: OrderedDict[tuple, Loaded] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def check(self, path: str | os.PathLike) -> Path:
        return is_inside(path, self.allowed)

    def listing(self) -> list[Path]:
        return list_traces(self.allowed)

    def get(self, path: str | os.PathLike) -> Loaded:
        p = self.check(path)
        try:
            st = p.stat()
        except OSError as e:
            raise LoadError(f"cannot read {p}: {e.strerror or e}") from None
        if not p.is_file():
            raise LoadError(f"{p} is not a file")
        key = (str(p), st.st_mtime_ns, st.st_size)
        with self._lock:
            cached = key in self._cache
        if not cached:
            try:
                check_openable(p, **self.limits)
            except NotOpenable as e:
                raise LoadError(str(e)) from None
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            # One load per file at a time: callbacks fired together wait for the first.
            path_lock = self._loading.setdefault(str(p), threading.Lock())
        with path_lock:
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
            loaded = self.build(str(p), p.name, lambda: self.load(p))
            with self._lock:
                self._cache[key] = loaded
                while len(self._cache) > self._max:
                    self._cache.popitem(last=False)
        return loaded

    def preload(self, paths: list[str]) -> threading.Thread:
        """Load and analyse ``paths`` in the background (errors wait for the page to ask)."""
        def work():
            from photon_trace.dashboard.timeline import placeholder_figure
            placeholder_figure("warm-up")  # plotly's lazy imports, once
            for path in paths:
                try:
                    self.get(path)
                except (PathRefused, LoadError):
                    pass
        t = threading.Thread(target=work, name="dashboard-preload", daemon=True)
        t.start()
        return t

    def build(self, path: str, label: str, read: Callable[[], Trace], window: tuple[int, int] | None = None) -> Loaded:
        notes: list[str] = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                trace = read()
            notes += [str(w.message) for w in caught]
        except Exception as e:  # any reader failure is the user's file, not our crash
            raise LoadError(f"could not load {label}: {e}") from None
        if not trace.device_spans and not trace.host_spans:
            raise LoadError(f"{label} holds no spans yet")
        try:
            report = self.analyze(trace, window) if window else self.analyze(trace)
            timeline = prepare_timeline(trace, report)
        except Exception as e:
            raise LoadError(f"could not analyse {label}: {type(e).__name__}: {e}") from None
        if trace.header.get("incomplete"):
            notes.append("the trace has no end line (still being written, or the run crashed)")
        return Loaded(path, label, trace, report, timeline, notes)


class FileSource:
    """A trace file being written: the first read loads it whole (validated), later reads
    parse only the complete lines appended since (gzip files are re-read whole)."""

    def __init__(self, path: str | os.PathLike, load: Callable[[Path], Trace]):
        self.path = Path(path)
        self._load = load
        self._offset = 0
        self._trace: Trace | None = None
        self._stat: tuple[int, int] | None = None

    def read(self) -> Trace | None:
        """The trace so far, or None when nothing changed since the last read."""
        st = self.path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stat:
            return None
        if self._trace is None or self.path.suffix == ".gz" or st.st_size < self._offset:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._trace = self._load(self.path)
            self._offset = self._complete_lines_end()
        else:
            self._append_new_lines()
        self._stat = stamp
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
                    getattr(self._trace, kind).extend(cls._make(r) for r in obj.get(kind, ()))
            elif "meta" in obj and isinstance(obj["meta"], dict):
                merge_header(self._trace.header, obj["meta"])
        self._offset += end


LIVE_PATH = "/v1/trace/recent"


class HttpSource:
    """The server's live endpoint: ``GET URL?cursor=N`` answering JSON
    ``{"header": {...}, "cursor": M, "host_spans": [[...]], ...}`` with rows as in a
    trace file's chunk lines (records after cursor N). A bare server URL gets the
    server's ``/v1/trace/recent``; ``$PHOTON_TRACE_API_KEY`` is sent as a bearer token."""

    def __init__(self, url: str, timeout_s: float = 2.0):
        from urllib.parse import urlsplit
        self.url = url.rstrip("/") + LIVE_PATH if urlsplit(url).path in ("", "/") else url
        self.timeout_s = timeout_s
        self.cursor = 0
        self._trace = Trace({})
        key = os.environ.get("PHOTON_TRACE_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}

    def read(self) -> Trace | None:
        import httpx
        r = httpx.get(self.url, params={"cursor": self.cursor}, headers=self._headers, timeout=self.timeout_s)
        r.raise_for_status()
        body = r.json()
        self._trace.header.update(body.get("header") or {})
        new = 0
        for kind, cls in _ROWS.items():
            rows = body.get(kind) or []
            getattr(self._trace, kind).extend(cls._make(x) for x in rows)
            new += len(rows)
        self.cursor = int(body.get("cursor", self.cursor))
        return self._trace if new or not self._trace.device_spans else None

    def forget_before(self, t: int) -> None:
        """Drop records that ended before ``t``: a live session must not grow without bound."""
        self._trace = tail(self._trace, t)


class LiveFollower:
    """The last ``seconds`` of a running trace, re-analysed when new records arrive."""

    def __init__(self, source: str, store: TraceStore, seconds: float = LIVE_SECONDS):
        self.source_name = source
        self.store = store
        self.seconds = seconds
        if source.startswith(("http://", "https://")):
            self.source: FileSource | HttpSource = HttpSource(source)
        else:
            path = source[len("file://"):] if source.startswith("file://") else source
            self.source = FileSource(path, store.load)
        self.current: Loaded | None = None
        self.version = 0          # bumped each time ``current`` is replaced
        self.error: str | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, interval_s: float = 1.0) -> None:
        """Poll in a background thread, so reading and analysing stay off the page's requests."""
        if self._thread is not None:
            return

        def loop():
            while True:
                self.poll()
                time.sleep(interval_s)
        self._thread = threading.Thread(target=loop, name="dashboard-live", daemon=True)
        self._thread.start()

    def poll(self) -> Loaded | None:
        """The newest view (the previous one when nothing changed); keeps the last good one on errors."""
        with self._lock:
            try:
                trace = self.source.read()
            except FileNotFoundError:
                self.error = f"waiting for {self.source_name} to appear"
                return self.current
            except Exception as e:
                self.error = f"live source {self.source_name}: {type(e).__name__}: {e}"
                return self.current
            if trace is None:
                return self.current
            end = _extent_end(trace)
            t_from = int(end - self.seconds * 1e9)
            recent = tail(trace, t_from - int(1e9))  # a second more, so the window's first step is whole
            if isinstance(self.source, HttpSource):
                self.source.forget_before(t_from - int(1e9))
            try:
                self.current = self.store.build(self.source_name, f"live: {self.source_name}",
                                                lambda: recent, window=(t_from, end))
                self.version += 1
                self.error = None
            except LoadError as e:
                self.error = str(e)
            return self.current
