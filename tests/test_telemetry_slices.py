"""The recorder's work runs in the engine's device waits, one short slice per ``work()``
call: the wait looks at its event between slices and blocks only when the tracer has
nothing left. Speed is measured in benchmarks/bench_trace_overhead.py; these tests pin
the structure."""
from __future__ import annotations

import sys
import threading
import types

from photon_trace.engine.device.base import Device
from photon_trace.engine.params import SamplingParams
from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.tracer import StepKind, Tracer, TraceLevel
from helpers.engine_helpers import tiny_engine


class UnitsTracer(Tracer):
    """``work()`` has ``units`` slices to do."""

    def __init__(self, units: int) -> None:
        self.units, self.calls = units, 0

    def work(self) -> bool:
        self.calls += 1
        self.units = max(0, self.units - 1)
        return self.units > 0


def wait(tracer: Tracer, polls_until_ready: int | None) -> list[str]:
    log: list[str] = []
    polls = iter(range(10**6))

    def ready() -> bool:
        log.append("poll")
        return polls_until_ready is not None and next(polls) >= polls_until_ready

    Device._wait_working(types.SimpleNamespace(tracer=tracer), ready, lambda: log.append("block"))
    return log


def test_a_wait_gives_the_tracer_slices_while_the_device_works_and_stops_when_it_is_done():
    busy = UnitsTracer(units=100)
    assert wait(busy, polls_until_ready=3) == ["poll"] * 4        # the event is looked at between slices
    assert busy.calls == 3                                         # and no slice starts once it is done


def test_a_wait_blocks_once_the_tracer_has_nothing_left():
    tracer = UnitsTracer(units=3)
    assert wait(tracer, polls_until_ready=None) == ["poll"] * 3 + ["block"]
    assert tracer.calls == 3
    idle = Tracer()                                                # the no-op tracer: straight to the wait
    assert wait(idle, polls_until_ready=None) == ["poll", "block"]


class PiecesSink:
    """A prepared sink whose write takes ``pieces`` units; notes where each piece ran."""

    def __init__(self, pieces: int = 5) -> None:
        self.pieces, self.done, self.where = pieces, 0, []
        self.delivered: list = []

    def prepare(self, event, arg):
        if event == "write":
            for _ in range(self.pieces):
                self.done += 1
                frames, f = set(), sys._getframe()
                while f is not None:
                    frames.add(f.f_code.co_name)
                    f = f.f_back
                self.where.append((threading.current_thread().name, "_wait_event" in frames))
                yield
        return (event, len(arg) if event == "write" else None)

    def deliver(self, event, payload) -> None:
        self.delivered.append(payload)


def test_each_work_call_runs_one_unit_when_the_slice_is_zero():
    sink = PiecesSink(pieces=5)
    tr = RecordingTracer(TraceLevel.ON, sinks=[sink], flush_interval_s=600, slice_us=0, nvtx=False)
    for i in range(3):
        tr.step(i, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    assert not tr.work()            # nothing due yet: no slice, no cycle
    tr._due_ns = 0                  # the cycle is due now
    progress, more = [], True
    while more:
        before = sink.done
        more = tr.work()
        progress.append(sink.done - before)
    tr.close()
    assert max(progress) == 1 and sum(progress) == 5 and len(progress) > 5
    assert tr.flushes >= 1 and ("write", 3) in sink.delivered


def test_the_engines_device_waits_do_the_recorders_work():
    sink = PiecesSink(pieces=2)
    tracer = RecordingTracer(TraceLevel.ON, sinks=[sink], flush_interval_s=0.001, nvtx=False)
    engine = tiny_engine(1, tracer=tracer)   # blocking: every commit waits out a whole forward
    try:
        params = SamplingParams(max_tokens=24, ignore_eos=True, temperature=0.0)
        engine.generate([[5, 6, 7, 8]] * 4, params)
    finally:
        engine.close()
    me = threading.current_thread().name
    in_waits = [w for w in sink.where if w == (me, True)]
    assert in_waits, f"no cycle ran in a device wait: {sink.where}"
    assert tracer.wait_work_ns > 0 and tracer.sink_errors == []
