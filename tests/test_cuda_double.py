"""The CUDA backend's own code, run on the CPU through a stand-in for ``torch.cuda``.

``helpers/cuda_double.py`` fakes streams, events, graphs, pinned memory and sync
debug mode; everything else is ``CudaDevice`` as it runs on a GPU: its staging
views over pinned blocks, batch and page buckets, row padding, graph keys,
capture and replay, the event arithmetic that places device times on the host
clock, the sync-debug capture and the pinned-memory check. Its tokens must equal
the host-process device's at depth 1 and 2 over the same random workloads as
``test_pipeline_equivalence``.

What the double cannot show, and the GPU tests (``test_gpu_engine``,
``test_cuda_sync_detection``) and ``scripts/gpu_check.sh`` must: real asynchrony
(every op runs when enqueued, so a missing stream wait never loses a race here),
device allocation (no ``cudaMalloc`` to count), capture errors other than a host
read inside a capture (allocation outside the pool, ops a capture rejects), torch's
sync warning on reading a device tensor, the host blocking on a pageable copy, and
timing (events stamp the host clock when the host reaches them).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from helpers.cuda_double import DEVICE_NAME, cuda_double
from helpers.engine_helpers import TINY, Req, drive
from helpers.request_strategies import assert_same_outputs, requests
from photon_trace.engine.device.base import NUM_SLOTS
from photon_trace.engine.engine import Engine
from photon_trace.engine.params import SamplingParams
from photon_trace.telemetry.tracer import DeviceOp, Stream

CUDA = dict(TINY, backend="cuda", dtype="float32")


@pytest.fixture(scope="module")
def fake():
    with cuda_double() as f:
        yield f


@pytest.fixture(scope="module")
def cuda_engines(fake):
    made = {"cuda1": Engine(**CUDA, depth=1), "cuda2": Engine(**CUDA, depth=2)}
    yield made
    for eng in made.values():
        eng.close()


@pytest.fixture
def engines(cuda_engines, tiny_engines):
    """The CUDA double's engines and, as "cpu", the session's blocking host-process engine
    (conftest: the sizes of ``TINY``)."""
    return {"cpu": tiny_engines[1], **cuda_engines}


def _prompts(n: int, length: int = 12) -> list[list[int]]:
    return [[(5 * i + j) % 250 + 1 for j in range(length)] for i in range(n)]


def test_the_double_stands_in_for_cuda(engines):
    dev = engines["cuda2"].device
    assert dev.backend == "cuda" and dev.device_name == DEVICE_NAME
    assert dev.program.table.device.type == "cpu"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(reqs=requests())
def test_cuda_backend_tokens_equal_the_cpu_backend_at_depth_1_and_2(engines, reqs):
    ref = drive(engines["cpu"], reqs)
    for name in ("cuda1", "cuda2"):
        assert_same_outputs(ref, drive(engines[name], reqs), reqs, f"{name} vs cpu")


def test_decode_replays_a_graph_per_slot_batch_and_page_bucket(engines):
    eng = engines["cuda2"]
    dev = eng.device
    before = {k: g.replays for k, g in dev._graphs.items()}
    drive(eng, [Req(0, p, SamplingParams(max_tokens=6, ignore_eos=True)) for p in _prompts(3)])
    replayed = {k for k, g in dev._graphs.items() if g.replays > before.get(k, 0)}
    # three rows decode in the 4-row bucket, in both slots, at one page bucket
    assert {(slot, rows) for slot, rows, _ in replayed} == {(0, 4), (1, 4)}
    for slot, rows, pages in replayed:
        assert pages in dev._page_buckets


def test_a_host_read_inside_a_capture_is_an_error(fake):
    import torch

    from helpers.cuda_double import FakeGraph

    g = FakeGraph()
    with pytest.raises(RuntimeError, match="capturing"):
        with fake.graph(g):
            torch.ones(2).sum().item()


def test_device_ops_land_on_the_host_clock_in_stream_order(engines):
    from photon_trace.telemetry.tracer import now_ns

    eng = engines["cuda2"]
    dev = eng.device
    seen = []
    real = dev.completed_ops

    def spy(slot):
        ops = real(slot)
        seen.append(ops)
        return ops

    t0 = now_ns()
    dev.completed_ops = spy
    try:
        from photon_trace.telemetry.recording.recorder import RecordingTracer
        from photon_trace.traced_run import attached

        tracer = RecordingTracer(keep=True, flush_interval_s=None, nvtx=False)
        with attached(eng, tracer):
            drive(eng, [Req(0, p, SamplingParams(max_tokens=5, ignore_eos=True)) for p in _prompts(2)])
        tracer.close()
    finally:
        del dev.completed_ops
    t1 = now_ns()
    assert seen
    for ops in seen:
        by_op = {op.op: op for op in ops}
        for op in ops:
            assert t0 <= op.t0 <= op.t1 <= t1, op
            assert op.stream == (Stream.COPY if op.op in (DeviceOp.COPY_BACK, DeviceOp.MASK_UPLOAD)
                                 else Stream.COMPUTE)
        fwd = by_op.get(DeviceOp.FORWARD) or by_op[DeviceOp.PREFILL]
        assert by_op[DeviceOp.STAGE].t1 <= fwd.t0 <= fwd.t1 <= by_op[DeviceOp.SAMPLE].t0
        assert by_op[DeviceOp.SAMPLE].t1 <= by_op[DeviceOp.COPY_BACK].t0


def test_staging_is_pinned_and_the_host_views_alias_it(engines):
    dev = engines["cuda2"].device
    for slot in range(NUM_SLOTS):
        st, host = dev.staging(slot), dev._host[slot]
        assert not dev._pin_check.pageable(host.values())
        st.positions[:3] = (7, 8, 9)
        assert host["positions"][:3].tolist() == [7, 8, 9]


def _traced(eng, reqs, sync_debug: bool = False):
    """Drive ``reqs`` with a recording tracer attached (under sync debug capture if asked);
    returns the trace."""
    from contextlib import nullcontext

    from photon_trace.telemetry.recording.recorder import RecordingTracer
    from photon_trace.traced_run import attached

    tracer = RecordingTracer(keep=True, flush_interval_s=None, nvtx=False)
    with attached(eng, tracer), (eng.device.sync_debug() if sync_debug else nullcontext()):
        drive(eng, reqs)
    tracer.close()
    return tracer.snapshot()


def test_a_pageable_copy_back_is_reported_at_the_copy_back_and_not_as_staging(engines):
    """The pinned check covers what each copy moves: the copy-back's landing zone made
    pageable is one unexpected wait per step at the copy-back's line, and the staging
    (still pinned) reports nothing."""
    from helpers.fault_helpers import engine_line, pageable_copy_back

    eng = engines["cuda2"]
    reqs = [Req(0, p, SamplingParams(max_tokens=5, ignore_eos=True)) for p in _prompts(2)]
    with pageable_copy_back(eng.device):
        trace = _traced(eng, reqs)
    unexpected = [w for w in trace.waits if not w.expected]
    assert unexpected and len(unexpected) == len(trace.steps)
    assert {(w.reason, w.site) for w in unexpected} == {
        ("copy-back: pageable host memory, the copy blocks the host", engine_line("self.device.copy_back(slot, B)"))}
    assert [w for w in _traced(eng, reqs).waits if not w.expected] == []


def test_sync_debug_records_a_synchronize_at_its_caller_and_not_graph_captures(fake):
    """A fresh engine captures graphs inside the run (each capture synchronizes first:
    skipped); a synchronize after commit's wait is recorded at this file's line."""
    from helpers.fault_helpers import line_of, patched

    def sync_after(wait_copied):
        def wait_then_sync(slot, step, **kw):
            wait_copied(slot, step, **kw)
            fake.synchronize()   # the accidental sync sync-debug must name
        return wait_then_sync

    reqs = [Req(0, p, SamplingParams(max_tokens=4, ignore_eos=True)) for p in _prompts(3)]
    with Engine(**CUDA, depth=2) as eng:
        captures = fake.captures
        clean = _traced(eng, reqs, sync_debug=True)
        assert fake.captures > captures, "the run was meant to capture graphs"
        assert [w for w in clean.waits if not w.expected] == []
        with patched(eng.device, "wait_copied", sync_after):
            faulty = _traced(eng, reqs, sync_debug=True)
    syncs = [w for w in faulty.waits if not w.expected]
    assert len(syncs) == len(faulty.steps)
    assert {(w.reason, w.site) for w in syncs} == {
        ("torch sync debug: a synchronizing CUDA operation", line_of(__file__, "# the accidental sync sync-debug"))}
    assert fake.sync_debug_mode == 0, "the capture restores the mode it found"


def test_the_gpu_tests_faults_fit_what_they_wrap(fake):
    """The faults ``test_cuda_sync_detection`` injects on a GPU, each run here once: its wrapper
    of ``wait_copied`` once lacked the ``expected=`` the engine passes, which only the first GPU
    run found (2026-12-04). Whether each is detected and costed stays the GPU test's to show:
    the double cannot make the sync an ``.item()`` makes."""
    from helpers.fault_helpers import GATE, pageable_copy_back
    from test_cuda_sync_detection import item_in_commit

    reqs = [Req(0, p, SamplingParams(max_tokens=6, ignore_eos=True)) for p in _prompts(3)]
    with Engine(**CUDA, depth=2) as eng:
        clean = drive(eng, reqs)
        assert GATE.on
        with item_in_commit(eng):
            item = drive(eng, reqs)
        with pageable_copy_back(eng.device):
            pageable = drive(eng, reqs)
    assert_same_outputs(clean, item, reqs, "an .item() in commit")
    assert_same_outputs(clean, pageable, reqs, "a pageable copy-back")


def test_every_run_re_anchors_the_device_clock_and_records_its_drift(engines):
    """A run's header states the anchor taken at its start (idle, narrowest of several
    brackets) and the drift measured at its end; device times of the run lie after it.
    The double's events stamp the host clock, so the drift is zero within its bound."""
    from photon_trace.engine.device.cuda import float32_step_ns
    from photon_trace.telemetry.analysis import analyze

    eng = engines["cuda2"]
    reqs = [Req(0, p, SamplingParams(max_tokens=4, ignore_eos=True)) for p in _prompts(2)]
    first, second = _traced(eng, reqs), _traced(eng, reqs)
    for trace in (first, second):
        clock = trace.header["clock"]
        assert clock["anchor_brackets"] >= 3 and clock["device_error_ns"] >= 0
        assert clock["anchor_ns"] <= min(d.t0 for d in trace.device_spans)
        assert abs(clock["drift_ns"]) <= clock["drift_error_ns"]
        assert clock["drift_after_ns"] >= max(d.t1 for d in trace.device_spans) - clock["anchor_ns"]
        assert analyze(trace).clock_error_ns == max(clock["device_error_ns"],
                                                    abs(clock["drift_ns"]) + clock["drift_error_ns"])
    assert second.header["clock"]["anchor_ns"] > first.header["clock"]["anchor_ns"] + first.header["clock"]["drift_after_ns"]
    # what re-anchoring buys: float32 milliseconds step 62.5 us ten minutes after an anchor
    assert float32_step_ns(10 * 60 * 1e3) == 62_500 and float32_step_ns(30 * 1e3) <= 2_000


def test_no_graph_is_captured_during_a_measured_run(fake):
    """``prepare`` ends with replays of the measured schedule: every (slot, bucket) a measured
    run uses is captured before it, on the pipelined engine and, replayed apart, on the
    blocking one (its batches differ: no zombies), run after run (step indices run on,
    so an odd-length schedule meets its batches in alternate slots)."""
    import tempfile

    from photon_trace.traced_run import trace_run
    from photon_trace.workload import Workload, engine_settings, prepare, warm_up

    wl = Workload(streams=5, tokens=12, seed=4)
    with Engine(model="tiny", backend="cuda", dtype="float32", depth=2, **engine_settings(wl)) as pipe, \
            Engine(model="tiny", backend="cuda", dtype="float32", depth=1, **engine_settings(wl)) as block, \
            tempfile.TemporaryDirectory() as d:
        prepared = prepare(pipe, wl)
        warm_up(block, prepared)
        steps = set()
        for eng in (pipe, block, pipe, block):
            captures, before = fake.captures, eng.steps
            trace_run(eng, prepared, f"{d}/run.trace.jsonl", analyse=False)
            assert fake.captures == captures, f"a graph was captured in a measured depth-{eng.config.depth} run"
            steps.add((eng.config.depth, (eng.steps - before) % 2))
        assert any(g.replays for g in pipe.device._graphs.values())
    assert (1, 1) in steps or (2, 1) in steps, "meant to include an odd-length schedule"
