"""What the operating system did with the engine's thread over one run: how long it ran, and how
long it was ready to run but waited for a CPU (the run queue), with the machine's load.

A run's period on a shared machine depends on both: a thread that waits for a CPU a third of
the run is slower for a reason no code change made. ``comparison.compare`` reads the share of
the run spent waiting in each of two traces and calls the pair not comparable when it moved
(``host_run`` in the trace header, written by ``traced_run.trace_run``; read by
``comparison.runq_share``).

Linux: ``/proc/thread-self/schedstat`` (cumulative ns on the CPU, ns waiting on a run queue,
timeslices). Elsewhere there is no such file: ``RunCpu.start`` returns None and the header says
nothing, so no comparison claims what it cannot know.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

SCHEDSTAT = "/proc/thread-self/schedstat"


def _read(path: str) -> tuple[int, int] | None:
    try:
        with open(path, encoding="ascii") as f:
            cpu, runq, *_ = f.read().split()
        return int(cpu), int(runq)
    except (OSError, ValueError):
        return None


@dataclass(slots=True)
class RunCpu:
    """Counters at the start of a run, on the thread that will drive the engine."""
    cpu_ns: int
    runq_ns: int
    wall_ns: int

    @classmethod
    def start(cls) -> RunCpu | None:
        got = _read(SCHEDSTAT)
        return cls(got[0], got[1], time.monotonic_ns()) if got else None

    def stop(self) -> dict | None:
        """The run's figures for the trace header (``host_run``); call on the same thread."""
        got = _read(SCHEDSTAT)
        if got is None:
            return None
        wall = time.monotonic_ns() - self.wall_ns
        return {"cpu_ns": got[0] - self.cpu_ns, "runq_ns": got[1] - self.runq_ns, "wall_ns": wall,
                "load_avg": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
                "source": SCHEDSTAT}

