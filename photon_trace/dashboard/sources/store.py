"""Where the dashboard's traces come from: allowed folders and a cache.

Nothing here draws. ``TraceStore`` loads and analyses a file once per version
of it (path, mtime, size) and keeps what the figures need; following a trace that
is still being written is ``live.py``.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from photon_trace.dashboard.sources.folders import PathRefused, is_inside, list_traces, public, shown
from photon_trace.dashboard.sources.openable import RANKS_PREFIX, NotOpenable, check_openable, job_files
from photon_trace.dashboard.timeline.data import TimelineData, prepare_spans, with_analysis
from photon_trace.telemetry.trace.columns import Columns, column
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.trace.rows import gc_paused

EDGE_NS = 200_000_000   # records kept beyond the window's edge when classifying the bubbles outside it
PARTIAL_GRACE_S = 2.0   # the longest the analysis waits for the page to draw the spans


class LoadError(Exception):
    """A trace that could not be read or analysed; the message is shown in the page."""


@dataclass(slots=True)
class Loaded:
    """One trace, analysed, with its timeline arrays. While the analysis runs a *partial*
    one (``report`` None, ``complete`` False) lets the page draw the spans already."""
    path: str
    label: str
    trace: Trace
    report: Any
    timeline: TimelineData
    notes: list[str]
    complete: bool = True
    ranks: Any = None       # a distributed job's analysis across ranks (``analysis/ranks.py``), else None


def _analysis():
    from photon_trace.telemetry.analysis import analyze, cost_model
    return analyze, cost_model


@contextmanager
def _held(lock: threading.Lock):
    try:
        yield
    finally:
        lock.release()


def _loader():
    from functools import partial

    from photon_trace.telemetry.trace.importers import load_any
    # A damaged profiler trace is shown as far as it is valid; its warnings become the page's notes.
    return partial(load_any, strict=False)


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


def _overlapping(records, a: int, b: int):
    """The records that overlap ``[a, b]``, in the form they came in (``Columns`` stay columns:
    a 10M-span trace's edges are found with array masks, not by reading every record)."""
    if not len(records):
        return records
    keep = (column(records, "t1") >= a) & (column(records, "t0") <= b)
    if isinstance(records, Columns):
        return records.take(keep)
    return [r for r, k in zip(records, keep.tolist()) if k]


def _between(trace: Trace, a: int, b: int) -> Trace:
    """The records of ``trace`` that overlap ``[a, b]`` (same header)."""
    return Trace(trace.header, _overlapping(trace.host_spans, a, b), _overlapping(trace.device_spans, a, b),
                 _overlapping(trace.waits, a, b), trace.steps, [])


def outside_bubbles(trace: Trace, window: tuple[int, int] | None) -> list:
    """The bubbles before and after the analysis window (warm-up and drain), classified by the
    same rules, so the timeline marks the whole trace alike; the cards never count them.
    Each side is classified on the records near it only, so a long trace pays for its edges,
    not for its length."""
    from photon_trace.telemetry.analysis import find_bubbles
    if window is None or not len(trace.device_spans):
        return []
    t_min, t_max = int(column(trace.device_spans, "t0").min()), int(column(trace.device_spans, "t1").max())
    w0, w1 = window
    out = []
    if t_min < w0:
        out += find_bubbles(_between(trace, t_min, w0 + EDGE_NS), (t_min, w0))
    if w1 < t_max:
        out += find_bubbles(_between(trace, w1 - EDGE_NS, t_max), (w1, t_max))
    return out


def _source_notes(trace: Trace) -> list[str]:
    """What the page must say about where the trace came from (a job: each rank's, and its clocks)
    beyond the loader's warnings (``analysis/source_notes.py``)."""
    from photon_trace.telemetry.analysis.source_notes import source_notes
    from photon_trace.telemetry.trace.ranks import is_ranks, split_ranks
    if not is_ranks(trace):
        return source_notes(trace, problems=False)
    return [f"rank {r}: {n}" for r, t in split_ranks(trace) for n in source_notes(t, problems=False)]


def _ranks(trace: Trace):
    """A job's analysis across ranks; None for one trace."""
    from photon_trace.telemetry.trace.ranks import is_ranks
    if not is_ranks(trace):
        return None
    from photon_trace.telemetry.analysis.ranks import analyze_ranks
    return analyze_ranks(trace)


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
        self._changed = threading.Condition(self._lock)   # a load published spans, finished or failed
        self._loading: dict[str, threading.Lock] = {}
        self._partial: dict[tuple, Loaded] = {}   # spans drawn while the analysis runs
        self._go: dict[tuple, threading.Event] = {}   # set when the analysis may start (``drawn``)
        self._failed: dict[tuple, str] = {}       # a load's error, for the page to show, until the file changes

    def check(self, path: str | os.PathLike) -> Path:
        return is_inside(path, self.allowed)

    def listing(self) -> list[Path]:
        return list_traces(self.allowed)

    def job(self, path: str | os.PathLike) -> list[Path] | None:
        """The rank files of a job (a folder of ranks, or ``ranks:`` files), each checked; None for one file."""
        text = str(path)
        if text.startswith(RANKS_PREFIX):
            return [self.check(x) for x in text[len(RANKS_PREFIX):].split(os.pathsep) if x]
        p = self.check(path)
        if not p.is_dir():
            return None
        files = job_files(p)
        if files is None:
            raise LoadError(f"{p.name}: a folder, but not one job's ranks (every trace in it named with its own "
                            f"rank number: rank0…, rank1…); open one of its traces")
        return files

    def shown(self, path: str | os.PathLike) -> str:
        """``path`` as the page may name it (``shown``)."""
        return shown(path, self.allowed)

    def public(self, message: str, path: str | os.PathLike | None = None) -> str:
        """``message`` fit for the page (``public``); ``path`` may be a live URL (left as it is)."""
        return public(message, None if path is None or "://" in str(path) else path, self.allowed)

    def _key(self, path: str | os.PathLike) -> tuple[Path, tuple]:
        files = self.job(path)
        if files is not None:
            try:
                return Path(str(path)), (str(path), *((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files))
            except OSError as e:
                raise LoadError(f"cannot read a rank's file: {e.strerror or e}") from None
        p = self.check(path)
        try:
            st = p.stat()
        except OSError as e:
            raise LoadError(f"cannot read {self.shown(p)}: {e.strerror or type(e).__name__}") from None
        if not p.is_file():
            raise LoadError(f"{self.shown(p)} is not a file")
        return p, (str(p), st.st_mtime_ns, st.st_size)

    def get(self, path: str | os.PathLike, *, draw_first: bool = False) -> Loaded:
        """The trace, loaded and analysed (waits for a load already under way). ``draw_first``
        (background loads for a page) lets the page draw the spans before the analysis starts."""
        p, key = self._key(path)
        files = self.job(path)
        with self._lock:
            cached = key in self._cache
        if not cached:
            try:
                for f in files or [p]:
                    check_openable(f, **self.limits)
            except NotOpenable as e:
                with self._changed:   # a page waiting on a background load is told too
                    self._failed[key] = str(e)
                    self._changed.notify_all()
                raise LoadError(str(e)) from None
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            # One load per file at a time: callbacks fired together wait for the first.
            path_lock = self._loading.setdefault(str(p), threading.Lock())
        go = self._go.setdefault(key, threading.Event())
        if not path_lock.acquire(blocking=False):
            go.set()                     # a caller needs the analysis now: the loader need not wait for a draw
            path_lock.acquire()
        with _held(path_lock):
            with self._lock:
                if key in self._cache:
                    return self._cache[key]

            def publish(part: Loaded) -> None:
                with self._changed:
                    self._partial[key] = part
                    self._changed.notify_all()
                # Let the page draw the spans before the analysis takes the CPU (and the GIL): a
                # 500k-span draw contended by the analysis took twice as long. Not forever: no page
                # may be looking.
                if draw_first:
                    go.wait(PARTIAL_GRACE_S)
            try:
                if files is not None:
                    from photon_trace.telemetry.trace.importers.rank_files import load_ranks
                    label = f"{p.name} ({len(files)} ranks)" if p.is_dir() else f"{len(files)} ranks"
                    loaded = self.build(str(path), label, lambda: load_ranks(files, load=self.load), publish=publish)
                else:
                    loaded = self.build(str(p), p.name, lambda: self.load(p), publish=publish)
            except LoadError as e:
                with self._changed:
                    self._failed[key] = str(e)
                    self._changed.notify_all()
                raise
            finally:
                self._partial.pop(key, None)
                self._go.pop(key, None)
            with self._changed:
                self._cache[key] = loaded
                self._failed.pop(key, None)   # opened again and loaded this time
                while len(self._cache) > self._max:
                    self._cache.popitem(last=False)
                self._changed.notify_all()
        return loaded

    def drawn(self, path: str | os.PathLike) -> None:
        """The page has drawn ``path``'s spans: its analysis may take the CPU now."""
        try:
            _, key = self._key(path)
        except (PathRefused, LoadError):
            return
        ev = self._go.get(key)
        if ev is not None:
            ev.set()

    def peek(self, path: str | os.PathLike, wait_s: float = 0.0) -> Loaded | None:
        """The analysed trace, else its spans while the analysis runs, else None (a load is then
        started in the background). A failed load raises its ``LoadError``. ``wait_s``: how long
        to wait for the spans (or the failure) when neither is there yet."""
        p, key = self._key(path)
        deadline = time.monotonic() + wait_s
        started = False
        with self._changed:
            while True:
                if key in self._cache:
                    return self._cache[key]
                if key in self._failed:   # kept: the poll and the re-draw that follows must both see it
                    raise LoadError(self._failed[key])
                partial = self._partial.get(key)
                if partial is not None:
                    return partial
                busy = self._loading.get(str(p))
                if not started and not (busy and busy.locked()):
                    self.preload([str(p)])   # its thread takes the lock only once this one waits
                    started = True
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)

    def preload(self, paths: list[str]) -> threading.Thread:
        """Load and analyse ``paths`` in the background (errors wait for the page to ask)."""
        def work():
            from photon_trace.dashboard.timeline.figure import placeholder_figure
            placeholder_figure("warm-up")  # plotly's lazy imports, once
            for path in paths:
                try:
                    self.get(path, draw_first=True)
                except (PathRefused, LoadError):
                    pass
        t = threading.Thread(target=work, name="dashboard-preload", daemon=True)
        t.start()
        return t

    def build(self, path: str, label: str, read: Callable[[], Trace], window: tuple[int, int] | None = None,
              publish: Callable[[Loaded], None] | None = None) -> Loaded:
        """Load (``read``), then the window and the span arrays (handed to ``publish`` as a
        partial view), then the analysis and the bubbles."""
        notes: list[str] = []
        # The collector stays off until the spans are drawn: its first pass after a load walks
        # every record (0.3 s at 500k spans), and whichever thread allocates next pays for it.
        # The analysis pays it instead, after the page has drawn.
        with gc_paused():
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    trace = read()
                notes += [self.public(str(w.message), path) for w in caught]
            except Exception as e:  # any reader failure is the user's file, not our crash
                raise LoadError(self.public(f"could not load {label}: {e}", path)) from None
            if not trace.device_spans and not trace.host_spans:   # none yet, or none valid (a note says why)
                raise LoadError(f"{label} holds no spans" + (f" to show: {notes[0]}" if notes else " yet"))
            stopped = trace.header.get("stopped")
            if isinstance(stopped, dict):
                notes.append(f"the trace stopped early: {stopped.get('why', 'a write failed')} "
                             f"({stopped.get('error', '')}); what was written before is shown")
            elif trace.header.get("incomplete"):
                notes.append("the trace has no end line (still being written, or the run crashed)")
            try:
                if window is None:
                    from photon_trace.telemetry.analysis import steady_state_window
                    window = steady_state_window(trace)
                spans = prepare_spans(trace, window)
                if publish is not None:
                    publish(Loaded(path, label, trace, None, spans, notes, complete=False))
            except Exception as e:
                raise LoadError(self.public(f"could not analyse {label}: {type(e).__name__}: {e}", path)) from None
        try:
            report = self.analyze(trace, window)
            timeline = with_analysis(spans, trace, report, outside_bubbles(trace, report.window))
            ranks = _ranks(trace)
            notes += _source_notes(trace) + ([ranks.alignment_text()] if ranks is not None else [])
        except Exception as e:
            raise LoadError(self.public(f"could not analyse {label}: {type(e).__name__}: {e}", path)) from None
        return Loaded(path, label, trace, report, timeline, notes, ranks=ranks)
