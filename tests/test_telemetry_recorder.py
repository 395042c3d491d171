"""RecordingTracer: levels, ring buffers, conversion, sinks, NVTX, and the synthetic run."""
from __future__ import annotations

import sys
import threading
import tracemalloc
import types

import pytest

from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.recording.sinks import LiveBuffer
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, RequestRecord, StepRecord
from helpers.waiting import wait_until
from helpers.loop_sim import SyntheticRun, VirtualClock, synthetic_trace
from photon_trace.telemetry.tracer import (DeviceOp, Phase, RequestEvent, StepKind, Stream, Tracer,
                                           TraceLevel)
from helpers.trace_checks import trace_problems


def one_step(tr: Tracer, clock: VirtualClock, step: int = 7, slot: int = 1) -> None:
    """The calls of one tick, FULL sub-phases included, on a virtual clock."""
    for phase, sub in ((Phase.PLAN, None), (Phase.LAUNCH, Phase.STAGE), (Phase.FINALIZE, Phase.MASK_BUILD),
                       (Phase.COMMIT, Phase.STREAM_OUT)):
        t0 = tr.begin(phase, step, slot)
        clock.advance(10)
        if sub is not None:
            s0 = tr.begin(sub, step, slot)
            clock.advance(5)
            tr.end(sub, step, slot, s0)
        if phase == Phase.COMMIT:
            tr.host_wait("commit: copy-back", True, clock.t, clock.t + 3, "engine/x.py:1", step)
            tr.device_op(Stream.COMPUTE, DeviceOp.FORWARD, step, slot, 100, 200, 90)
            tr.step(step, kind=StepKind.DECODE, slot=slot, rows=4, zombie_rows=1, constrained_rows=2, tokens=3)
        clock.advance(10)
        tr.end(phase, step, slot, t0)
    tr.request(42, RequestEvent.FIRST_TOKEN, clock.t, 1)


def record(level: TraceLevel, **kw) -> tuple[RecordingTracer, VirtualClock]:
    clock = VirtualClock(1000)
    tr = RecordingTracer(level, keep=True, flush_interval_s=None, nvtx=False, clock=clock, **kw)
    return tr, clock


def test_on_records_the_four_phases_and_everything_else_converted_to_records():
    tr, clock = record(TraceLevel.ON)
    one_step(tr, clock)
    t = tr.snapshot()
    tr.close()
    assert [s.phase for s in t.host_spans] == ["plan", "launch", "finalize", "commit"]
    me = threading.current_thread().name
    # on a stand-in clock the thread's real counters mean nothing: not recorded
    assert t.host_spans[0] == HostSpan("plan", 7, 1, 1000, 1020, me, -1, -1)
    assert t.device_spans == [DeviceSpan("compute", "forward", 7, 1, 100, 200, 90)]
    assert t.waits == [HostWait("commit: copy-back", True, t.waits[0].t0, t.waits[0].t0 + 3, "engine/x.py:1", 7)]
    assert t.steps == [StepRecord(7, "decode", 1, 4, 1, 2, 3)]
    assert t.requests == [RequestRecord(42, "first_token", clock.t, 1)]
    assert t.header["trace_level"] == "on"


def test_full_adds_the_sub_phases_nested_in_their_phase():
    tr, clock = record(TraceLevel.FULL)
    one_step(tr, clock)
    t = tr.snapshot()
    tr.close()
    phases = [s.phase for s in t.host_spans]
    assert phases == ["plan", "stage", "launch", "mask_build", "finalize", "stream_out", "commit"]
    spans = {s.phase: s for s in t.host_spans}
    assert spans["launch"].t0 < spans["stage"].t0 <= spans["stage"].t1 < spans["launch"].t1


def test_off_is_the_base_no_op_and_records_nothing():
    tr, clock = record(TraceLevel.OFF)
    assert not tr.level
    for name in ("begin", "end", "host_wait", "device_op", "step", "request"):
        assert getattr(tr, name).__func__ is getattr(Tracer, name)
    one_step(tr, clock)
    t = tr.snapshot()
    tr.close()
    assert not (t.host_spans or t.device_spans or t.waits or t.steps or t.requests)


def test_begin_returns_the_clock():
    tr, clock = record(TraceLevel.ON)
    clock.advance(12345)
    assert tr.begin(Phase.PLAN, 0, 0) == clock.t
    tr.close()


def test_a_wrapped_ring_keeps_the_newest_records_and_counts_the_lost():
    tr, clock = record(TraceLevel.ON, capacity=16)
    assert tr.capacity == 16
    for i in range(40):
        tr.step(i, kind=StepKind.DECODE, slot=i % 2, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    t = tr.snapshot()
    assert [s.step for s in t.steps] == list(range(24, 40))
    assert tr.dropped["steps"] == 24 and t.header["dropped"] == {"steps": 24}
    # after a drain the ring is reusable without further loss
    for i in range(40, 50):
        tr.step(i, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    t = tr.snapshot()
    tr.close()
    assert [s.step for s in t.steps][-10:] == list(range(40, 50)) and tr.dropped["steps"] == 24


def test_steady_state_recording_allocates_only_the_records_it_replaces():
    tr, clock = record(TraceLevel.ON, capacity=1024)

    def burst(n):
        for i in range(n):
            t0 = tr.begin(Phase.LAUNCH, i, i & 1)
            tr.end(Phase.LAUNCH, i, i & 1, t0)
            tr.device_op(Stream.COMPUTE, DeviceOp.FORWARD, i, i & 1, 1, 2, 0)

    burst(2048)  # fill the rings once
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    burst(20_000)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename")
                if s.traceback[0].filename.endswith("recorder.py"))
    assert grown < 64 * 1024, f"recording grew memory by {grown} bytes"
    tr.close()


def test_host_spans_carry_the_recording_threads_name():
    tr, clock = record(TraceLevel.ON)

    def work():
        t0 = tr.begin(Phase.PLAN, 1, 0)
        tr.end(Phase.PLAN, 1, 0, t0)

    th = threading.Thread(target=work, name="scheduler")
    th.start()
    th.join()
    work()
    t = tr.snapshot()
    tr.close()
    assert [s.thread for s in t.host_spans] == ["scheduler", threading.current_thread().name]


def test_describe_before_the_first_flush_lands_in_the_header_and_later_as_an_update():
    live = LiveBuffer()
    tr = RecordingTracer(TraceLevel.ON, sinks=[live], keep=True, flush_interval_s=None, nvtx=False)
    tr.describe(model="tiny", backend="cpu", clock={"device_error_ns": 1500})
    first = tr.flush()
    assert first.header == {}
    tr.describe(device={"name": "dev0"})
    second = tr.flush()
    assert second.header == {"device": {"name": "dev0"}}
    t = tr.snapshot()
    tr.close()
    assert t.header["model"] == "tiny" and t.header["device"]["name"] == "dev0"
    assert t.header["clock"]["device_error_ns"] == 1500 and "wall_ns" in t.header["clock"]


def test_the_flusher_thread_delivers_while_running():
    live = LiveBuffer()
    tr = RecordingTracer(TraceLevel.ON, sinks=[live], flush_interval_s=0.02, nvtx=False)
    tr.step(1, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    state = {"cursor": 0}

    def delivered():
        t, state["cursor"] = live.recent(state["cursor"])
        return t.steps

    got = wait_until(delivered, 30, "the flusher delivering step 1")
    cursor = state["cursor"]
    assert [s.step for s in got] == [1]
    tr.step(2, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    tr.close()
    t, cursor2 = live.recent(cursor)
    assert [s.step for s in t.steps] == [2] and cursor2 > cursor


def test_live_buffer_reports_chunks_the_reader_missed():
    live = LiveBuffer(max_chunks=2)
    tr = RecordingTracer(TraceLevel.ON, sinks=[live], flush_interval_s=None, nvtx=False)
    for i in range(5):
        tr.step(i, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
        tr.flush()
    t, cur = live.recent(1)
    tr.close()
    assert [s.step for s in t.steps] == [3, 4] and t.header["live"]["missed_chunks"] == 2 and cur == 5


def test_a_failing_sink_is_detached_and_recording_continues():
    class Broken:
        def open(self, header): pass
        def write(self, chunk): raise OSError("disk full")
        def close(self): pass

    tr, clock = record(TraceLevel.ON)
    tr.add_sink(Broken())
    tr.step(1, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    tr.flush()
    tr.step(2, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    t = tr.snapshot()
    tr.close()
    assert [s.step for s in t.steps] == [1, 2]
    assert len(tr.sink_errors) == 1 and "disk full" in tr.sink_errors[0]


class FakeDomain:
    def __init__(self):
        self.calls = []

    def get_event_attributes(self, message=None, color=None, category=None, payload=None):
        return types.SimpleNamespace(message=message, color=color, category=category, payload=payload)

    def push_range(self, attrs):
        self.calls.append(("push", attrs.message, attrs.category, attrs.color, attrs.payload))

    def pop_range(self):
        self.calls.append(("pop",))


def fake_nvtx(monkeypatch) -> FakeDomain:
    domain = FakeDomain()
    mod = types.SimpleNamespace(enabled=lambda: True, get_domain=lambda name: domain)
    monkeypatch.setitem(sys.modules, "nvtx", mod)
    return domain


def test_nvtx_ranges_are_pushed_per_phase_with_the_step_as_payload(monkeypatch):
    domain = fake_nvtx(monkeypatch)
    tr, clock = record(TraceLevel.ON)
    tr.close()
    tr = RecordingTracer(TraceLevel.ON, keep=True, flush_interval_s=None, nvtx=True, clock=clock)
    assert tr.nvtx is not None
    one_step(tr, clock, step=5)
    t = tr.snapshot()
    tr.close()
    pushes = [c for c in domain.calls if c[0] == "push"]
    assert [c[1] for c in pushes] == ["plan", "launch", "finalize", "commit"]  # FULL-only skipped at ON
    assert all(c[2] == c[1] and c[4] == 5 and isinstance(c[3], int) for c in pushes)
    assert len(set(c[3] for c in pushes)) == 4  # a colour per phase
    assert domain.calls.count(("pop",)) == 4
    assert len(t.host_spans) == 4


def test_without_nvtx_or_without_a_profiler_nvtx_is_a_no_op(monkeypatch):
    tr = RecordingTracer(TraceLevel.ON, flush_interval_s=None)  # real nvtx, no tool attached
    assert tr.nvtx is None
    tr.close()
    monkeypatch.setitem(sys.modules, "nvtx", None)  # import fails
    tr, clock = record(TraceLevel.ON)
    tr.close()
    tr = RecordingTracer(TraceLevel.ON, keep=True, flush_interval_s=None, nvtx=True, clock=clock)
    assert tr.nvtx is None
    one_step(tr, clock)
    assert len(tr.snapshot().host_spans) == 4
    tr.close()


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("bug", [False, True])
def test_synthetic_runs_are_complete_and_ordered(depth, bug):
    t = synthetic_trace(SyntheticRun(depth=depth, mask_upload_bug=bug, steps=50, requests=12))
    assert trace_problems(t) == []
    assert {s.thread for s in t.host_spans} == {"scheduler"}
    kinds = {s.kind for s in t.steps}
    assert {"decode", "mixed"} <= kinds
    assert any(s.constrained_rows for s in t.steps)
    assert {r.event for r in t.requests} == {"arrival", "admitted", "first_token", "finalized", "freed"}
    assert any(not w.expected for w in t.waits) == bug
    if depth == 2:
        assert sum(s.zombie_rows for s in t.steps) > 0


def test_make_tracer_builds_the_usual_setups(tmp_path):
    from photon_trace.telemetry.setup import make_tracer
    from photon_trace.telemetry.trace.file import load_trace
    from photon_trace.telemetry.tracer import NULL_TRACER

    assert make_tracer("off") is NULL_TRACER
    live = LiveBuffer()
    tr = make_tracer("full", trace_dir=tmp_path, live=live, header={"model": "m"}, nvtx=False)
    assert tr.level == TraceLevel.FULL
    tr.step(1, kind=StepKind.DECODE, slot=0, rows=1, zombie_rows=0, constrained_rows=0, tokens=1)
    tr.close()
    (path,) = tmp_path.glob("run-*.trace.jsonl")
    t = load_trace(path)
    assert [s.step for s in t.steps] == [1] and t.header["model"] == "m"
    assert [s.step for s in live.recent(0)[0].steps] == [1]


def test_spans_and_waits_carry_the_threads_cpu_and_run_queue_time():
    """Issue 28 item 1: on the real clock, a span that computes is on the CPU for most of its
    length, a wait that sleeps is not (a sleep is the host not running)."""
    import time as _time
    tr = RecordingTracer(TraceLevel.ON, keep=True, flush_interval_s=None, nvtx=False)
    t0 = tr.begin(Phase.PLAN, 1, 0)
    end = _time.thread_time_ns() + 2_000_000
    while _time.thread_time_ns() < end:     # 2 ms of this thread's own CPU, however busy the machine
        pass
    tr.end(Phase.PLAN, 1, 0, t0)
    w0 = tr.begin_wait()
    _time.sleep(0.005)
    tr.host_wait("commit: copy-back", True, w0, tr._now(), "engine/x.py:1", 1)
    t = tr.snapshot()
    tr.close()
    (span,), (wait,) = t.host_spans, t.waits
    assert 2_000_000 <= span.cpu_ns <= span.t1 - span.t0 + 100_000, span
    assert span.runq_ns >= 0 and t.header["host"]["thread_clock"] in ("schedstat", "thread_time")
    assert 0 <= wait.cpu_ns < (wait.t1 - wait.t0) / 2, wait
