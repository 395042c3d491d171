"""DeviceStats: a recorder sink that turns each flushed chunk into Prometheus figures.

It runs on the recorder's flusher thread (never the engine's). Each chunk extends
the analysed time to the latest compute op; that new stretch, less the times the
engine had nothing to do (the trace's ``no_work`` spans and the loop's sleeps, the
current one included; counted apart as no work), is analysed with the telemetry analysis
functions over the last two chunks' records (so a gap at the stretch's start still
sees the op before it): busy and idle time, bubbles with their causes, accidental
syncs with their call sites, step periods. Recent-window gauges (idle ratio,
median period) cover the last ``window_s`` seconds; rates (tokens/s) are left to
Prometheus, over the token counters.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from statistics import median

from photon_trace.telemetry.analysis import busy_intervals, device_gaps
from photon_trace.telemetry.analysis.bubbles import classify
from photon_trace.telemetry.analysis.gaps import Gaps, Ops
from photon_trace.telemetry.analysis.steps import step_periods
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk, Trace
from photon_trace.telemetry.tracer import NO_WORK

NS = 1e-9


def subtract(window: tuple[int, int], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``window`` less the union of ``holes``, as disjoint sub-windows in order."""
    w0, w1 = window
    out, start = [], w0
    for h0, h1 in sorted(holes):
        if h1 <= start or h0 >= w1:
            continue
        if h0 > start:
            out.append((start, h0))
        start = max(start, h1)
    if start < w1:
        out.append((start, w1))
    return out


class DeviceStats:
    """``metrics``: a ``ServerMetrics``; ``idle_intervals(now_ns)``: when the engine slept."""

    def __init__(self, metrics, idle_intervals: Callable[[int], list[tuple[int, int]]],
                 window_s: float = 10.0) -> None:
        self.metrics = metrics
        self.idle_intervals = idle_intervals
        self.window_ns = int(window_s * 1e9)
        self._header: dict = {}
        self._prev: Chunk | None = None
        self._until = 0        # compute-op time analysed so far
        self._recent: deque = deque()  # (wall ns, window ns, idle ns, periods)
        self._lock = threading.Lock()
        self.busy_ns = self.idle_ns = 0

    def open(self, header: dict) -> None:
        self._header = dict(header)

    def close(self) -> None:
        pass

    def write(self, chunk: Chunk) -> None:
        with self._lock:
            prev, self._prev = self._prev, chunk
            trace = Trace(self._header)
            for c in (prev, chunk):
                if c is not None:
                    for kind in RECORD_KINDS:
                        getattr(trace, kind).extend(getattr(c, kind))
            ends = [d.t1 for d in chunk.device_spans if d.stream == "compute"]
            window_ns = idle_ns = 0
            periods: list[int] = []
            if ends:
                w1 = max(ends)
                w0 = self._until or min(d.t0 for d in chunk.device_spans if d.stream == "compute")
                if w1 > w0:
                    self._until = w1
                    holes = self.idle_intervals(time.monotonic_ns()) + [
                        (h.t0, h.t1) for h in trace.host_spans if h.phase == NO_WORK]
                    subs = subtract((w0, w1), holes)
                    window_ns, idle_ns = self._analyse(trace, subs)
                    kept = sum(b - a for a, b in subs)    # what no work leaves; all of the rest was idle
                    self.metrics.device_no_work.inc((w1 - w0 - kept) * NS)
                    periods = self._periods(trace, (w0, w1), holes)
            self._remember(window_ns, idle_ns, periods)

    def _analyse(self, trace: Trace, windows: list[tuple[int, int]]) -> tuple[int, int]:
        """Busy, idle, bubbles and syncs of ``windows`` (the stretch less its no work): one set
        of ops and one classification for all of them. Per window, each paid the attribution's
        setup over both chunks (7-8 ms): with a paced client's many sleeps, tens of ms a chunk
        under the GIL, on a thread beside the engine's (docs/measurements.md, the paced server)."""
        m = self.metrics
        ops = Ops(trace)
        length = sum(b - a for a, b in windows)
        busy = sum(b - a for w in windows for a, b in busy_intervals(trace, w, ops))
        self.busy_ns += busy
        self.idle_ns += length - busy
        m.device_busy.inc(busy * NS)
        m.device_idle.inc((length - busy) * NS)
        for b in classify(trace, Gaps.joined(ops, [device_gaps(trace, w, ops) for w in windows])):
            m.bubbles.labels(b.cause).inc()
            m.bubble_seconds.labels(b.cause).inc(b.duration_ns * NS)
        for w in trace.waits:
            if not w.expected and any(a <= w.t0 < b for a, b in windows):
                m.syncs.labels(w.site).inc()
                m.sync_seconds.labels(w.site).inc((w.t1 - w.t0) * NS)
        return length, length - busy

    def _periods(self, trace: Trace, window: tuple[int, int], holes: list[tuple[int, int]]) -> list[int]:
        """Periods of the steps that started in ``window``, except those spanning an engine sleep."""
        out = []
        for _, t0, period in step_periods(trace):
            if window[0] <= t0 < window[1] and not any(h0 < t0 + period and t0 < h1 for h0, h1 in holes):
                out.append(period)
                self.metrics.step_period.observe(period * NS)
        return out

    def _remember(self, window_ns: int, idle_ns: int, periods: list[int]) -> None:
        now = time.monotonic_ns()
        self._recent.append((now, window_ns, idle_ns, periods))
        while self._recent and now - self._recent[0][0] > self.window_ns:
            self._recent.popleft()
        win = sum(r[1] for r in self._recent)
        idle = sum(r[2] for r in self._recent)
        all_periods = [p for r in self._recent for p in r[3]]
        m = self.metrics
        m.idle_ratio.set(idle / win if win else 0.0)
        m.recent_period.set(median(all_periods) * NS if all_periods else 0.0)
