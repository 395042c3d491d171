"""A sink's own delivery thread: where its I/O (and a plain sink's whole ``write``) runs.

The recorder prepares chunks in the engine's device waits (recorder.py); whatever
can block — writing a file, an HTTP POST, a user's sink — happens here, one thread
per sink, so a sink that hangs stalls only itself. Each port holds a bounded queue:
when its sink falls behind, new chunks are dropped and counted (``dropped``, in the
sink's own unit: records, or spans for OTLP), never buffered without limit, and
``abandon`` at a deadline counts what the sink never got. A sink that raises is
detached: the error is reported once and the rest of its queue is counted as lost.

The thread holds the GIL only for the Python around its sink's calls (the file
write and socket I/O release it), so it does not compete with the engine's thread
the way conversion on a thread would.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

MAX_QUEUED = 64   # chunks (~0.5 s each) a port holds before it drops: half a minute behind


class SinkPort:
    """``sink``: the sink; ``name``: how its losses are keyed (``"<name>.<unit>"``);
    ``call(event, item)``: runs one queued item on this thread (``"open"``, ``"write"``,
    ``"close"``); ``on_error(port, event, exc)``: a sink call raised."""

    def __init__(self, sink, name: str, unit: str, call: Callable[[str, object], None],
                 on_error: Callable[[SinkPort, str, BaseException], None], max_queued: int = MAX_QUEUED) -> None:
        self.sink = sink
        self.key = f"{name}.{unit}"
        self._call = call
        self._on_error = on_error
        self._max = max_queued
        self._queue: deque[tuple[str, object, int]] = deque()
        self._cond = threading.Condition()
        self._busy: tuple[str, object, int] | None = None
        self._thread: threading.Thread | None = None
        self._name = name
        self.failed = False        # detached after an error
        self.abandoned = False     # given up on at a deadline (its thread may still be blocked)
        self.closed = False        # its close ran
        self.dropped = 0           # in the port's unit
        self.busy_ns = 0           # time spent in the sink's calls
        self.windows: deque[tuple[int, int]] = deque(maxlen=4096)  # (t0, t1) monotonic ns of each call

    # -- producer side (the recorder) ------------------------------------------------------
    def submit(self, event: str, item: object, weight: int = 0) -> bool:
        """Queue ``item``; a ``write`` that does not fit, or reaches a failed or abandoned
        port, is dropped and its ``weight`` counted. Never blocks."""
        with self._cond:
            if self.failed or self.abandoned or self.closed:
                self.dropped += weight
                return False
            if event == "write" and len(self._queue) >= self._max:
                self.dropped += weight
                return False
            self._queue.append((event, item, weight))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"photon-trace-{self._name}", daemon=True)
                self._thread.start()
            self._cond.notify()
            return True

    def wait_idle(self, deadline: float) -> bool:
        """Wait (until ``deadline``, a ``time.monotonic()``) for the queue to empty; True if it did."""
        with self._cond:
            while (self._queue or self._busy is not None) and not (self.failed or self.abandoned):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def abandon(self) -> int:
        """Give up on what is queued or in flight (the sink missed a deadline); returns what
        that drops. The thread, if blocked in the sink, is left behind (a daemon)."""
        with self._cond:
            if self.closed or self.failed:
                return 0
            lost = sum(w for _, _, w in self._queue) + (self._busy[2] if self._busy else 0)
            self._queue.clear()
            self.abandoned = True
            self.dropped += lost
            self._cond.notify_all()
            return lost

    # -- the port's thread -------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    if self.abandoned or self.closed or self.failed:
                        return
                    self._cond.wait()
                self._busy = item = self._queue.popleft()
            event, payload, weight = item
            t0 = time.monotonic_ns()
            error = None
            try:
                self._call(event, payload)
            except Exception as e:  # a failing sink is detached; the engine keeps running
                error = e
            t1 = time.monotonic_ns()
            self.busy_ns += t1 - t0
            self.windows.append((t0, t1))
            if error is not None and not self.abandoned:
                self._on_error(self, event, error)   # reported before a flush waiting on us returns
            with self._cond:
                self._busy = None
                if self.abandoned:          # the recorder gave up while we were blocked: counted there
                    self._cond.notify_all()
                    return
                if error is not None:
                    self.failed = True
                    self.dropped += weight + sum(w for _, _, w in self._queue)
                    self._queue.clear()
                elif event == "close":
                    self.closed = True
                self._cond.notify_all()
            if error is not None or event == "close":
                return
