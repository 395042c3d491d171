"""The calling thread's own clocks: its on-CPU time and its run-queue wait, read cheaply.

A host span's wall time alone cannot say whether the host *ran*: a phase that took 5 ms
may have computed for 5 ms, waited 4 ms for a core another process held (runnable, not
running: *descheduled*), or slept 4 ms on the GIL, a lock or I/O (off the CPU and not
runnable: *blocked*). The recorder reads two counters of the recording thread at each
span's begin and end and at each host wait's start and end; their differences become the
record's ``cpu_ns`` and ``runq_ns`` (``trace/records.py``), and the analysis splits host
lateness by them (``analysis/host_running.py``).

Where they come from:

* On-CPU time: ``time.thread_time_ns()`` (``CLOCK_THREAD_CPUTIME_ID``), exact to the call.
  (schedstat's own on-CPU field is not: the kernel adds a running thread's time to it only
  at a tick or a switch, so a 12 us span read 0 there.)
* Run-queue wait, on Linux: the second field of ``/proc/self/task/<tid>/schedstat``, the
  scheduler's per-thread accounting (``CONFIG_SCHED_INFO``). A wait is added to it when the
  thread gets a CPU, so for the thread reading it (running, by definition) it is complete.
  Each thread keeps its file open and reads it with one ``os.pread`` (about 0.3-0.5 us on
  the 2-core development VM); the bytes are parsed later, when the recorder converts its
  rings.
* Elsewhere (macOS, a container whose ``/proc`` hides it, a kernel whose counters stay 0):
  the on-CPU time only, and no run-queue wait (-1): the analysis
  then tells *on-CPU* from *not running*, but cannot tell descheduled from blocked.

``source`` says which one a clock uses; the recorder writes it into the trace header
(``host.thread_clock``).
"""
from __future__ import annotations

import os
import threading
import time

SCHEDSTAT = "schedstat"
THREAD_TIME = "thread_time"

class _Fd:
    """A thread's open schedstat file, closed when the thread's locals go (its thread ended)."""
    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _schedstat_path() -> str:
    return f"/proc/self/task/{threading.get_native_id()}/schedstat"


def schedstat_works() -> bool:
    """Whether this thread's schedstat file can be read and counts (its on-CPU field is not 0)."""
    try:
        with open(_schedstat_path(), "rb") as f:
            cpu, runq = f.read().split()[:2]
        return int(cpu) > 0 and int(runq) >= 0
    except (OSError, ValueError):
        return False


class ThreadClock:
    """``read()`` the calling thread's counters (any thread; each keeps its own file open);
    ``counters(a, b)`` turns two readings of one thread into ``(cpu_ns, runq_ns)``. A reading is
    ``(thread_time_ns, schedstat bytes)``, or ``thread_time_ns`` alone where there is no schedstat."""

    def __init__(self, source: str | None = None) -> None:
        self.source = source or (SCHEDSTAT if schedstat_works() else THREAD_TIME)
        self._local = threading.local()
        # chosen once: the hot path calls one bound method, no test of the source
        self.read = self._read_schedstat if self.source == SCHEDSTAT else time.thread_time_ns

    def _read_schedstat(self) -> tuple[int, bytes] | None:
        try:
            return _thread_time(), os.pread(self._local.fd, 64, 0)
        except AttributeError:      # this thread's first read: open its file
            return self._open_and_read()
        except OSError:
            return None

    def _open_and_read(self) -> tuple[int, bytes] | None:
        try:
            fd = os.open(_schedstat_path(), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        self._local.holder = _Fd(fd)
        self._local.fd = fd
        return _thread_time(), os.pread(fd, 64, 0)


_thread_time = time.thread_time_ns


def counters(a: tuple[int, bytes] | int | None, b: tuple[int, bytes] | int | None) -> tuple[int, int]:
    """``(cpu_ns, runq_ns)`` between readings ``a`` and ``b`` of one thread; -1 for what was
    not measured (no reading, or ``thread_time`` readings alone: no run-queue wait)."""
    if a is None or b is None:
        return -1, -1
    if type(a) is tuple and type(b) is tuple:
        try:
            runq = int(b[1].split()[1]) - int(a[1].split()[1])
        except (ValueError, IndexError):
            runq = -1
        return max(0, b[0] - a[0]), max(-1, runq)
    if type(a) is int and type(b) is int:
        return max(0, b - a), -1
    return -1, -1
