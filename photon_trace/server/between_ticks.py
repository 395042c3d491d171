"""The engine loop's own host time between two ticks, recorded as ``serve`` host spans.

Between one ``Engine.step`` and the next, the engine thread hands the tick's tokens to their
requests' event loops, takes the queued commands and adds their requests: host code, while
the device may have nothing queued. Without a span, the analysis saw that time as "outside
phases" with nothing to tell whether the thread ran: beside other jobs, a thread waiting for
a core read as host code, 49.6 ms of it in one paced-client run (issue 28). A ``serve`` span
carries the thread's on-CPU and run-queue counters as every phase does (the recorder reads
them at ``begin`` and ``end``), and the analysis splits it the same way
(``telemetry/analysis/host_running.py``): descheduled, blocked, or host code in it.

The sleep while the engine has nothing to run is not in it: ``Engine.wait_for_work`` records
that as ``no_work``. The loop ends its span before the sleep and begins another when the
sleep returns, so a span's counters are its own (a sleep inside would read as time off the
CPU, "blocked", spread over the whole span).
"""
from __future__ import annotations

from photon_trace.telemetry.tracer import Phase, Tracer


class BetweenTicks:
    """At most one open ``serve`` span on the engine thread: ``begin`` after a tick (or a sleep),
    ``end`` before the next tick (or sleep). Its step is the count of steps the engine had
    committed when it began (the index of the next step to commit), its slot -1."""

    __slots__ = ("_tracer", "_step", "_t0")

    def __init__(self) -> None:
        self._tracer: Tracer | None = None
        self._step = 0
        self._t0: int | None = None

    def begin(self, engine) -> None:
        self.end()
        tracer = self._tracer = engine.tracer
        self._step = engine.stats().steps
        self._t0 = tracer.begin(Phase.SERVE, self._step, -1)

    def end(self) -> None:
        t0 = self._t0
        if t0 is not None:
            self._t0 = None
            self._tracer.end(Phase.SERVE, self._step, -1, t0)
