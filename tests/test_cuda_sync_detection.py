"""CUDA-only sync detection: torch's sync debug mode and copies from pageable memory.

GPU tests (marked ``gpu``, skipped without CUDA) run the real engine on the CUDA
backend: a clean pipelined run under sync debug mode records no accidental sync;
(d) a copy-back into pageable host memory and an ``.item()`` in commit are each
detected, attributed to their call site and costed (see ``fault_helpers``). The
model is the ``1.5b`` preset by default so the device, not the host, sets the
pace, as the cost comparison needs (``PHOTON_TRACE_GPU_TEST_MODEL`` overrides).
The CPU tests pin down how a sync-debug warning becomes a host wait.
"""
from __future__ import annotations

import os

import pytest
import torch

from helpers.fault_helpers import Runs, cost, engine_line, line_of, pageable_copy_back, patched, top_host_cause
from photon_trace.telemetry.analysis import Cause
from photon_trace.workload import Workload, engine_settings, prepare

GPU_MODEL = os.environ.get("PHOTON_TRACE_GPU_TEST_MODEL", "1.5b")
WORKLOAD = Workload(streams=8, tokens=48, seed=5)
REPEATS = 2
COPY_BACK_SITE = engine_line("self.device.copy_back(slot, B)")


def gpu_test(fn):
    return pytest.mark.gpu(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")(fn))


def item_in_commit(eng):
    """Right after commit's wait, an ``.item()`` of a device value. Read on the engine's
    compute stream: on the legacy default stream it would not wait for the (non-blocking)
    compute stream and would cost nothing to find."""
    def wrap(wait_copied):
        def wait_then_item(slot, step, **kw):
            wait_copied(slot, step, **kw)
            with torch.cuda.stream(eng.device.compute):
                eng.device.program.read_table(0).item()   # the site sync debug must name
        return wait_then_item
    return patched(eng.device, "wait_copied", wrap)


ITEM_SITE = line_of(__file__, "# the site sync debug must name")


@pytest.fixture(scope="module")
def gpu_runs(tmp_path_factory) -> Runs:
    from photon_trace.engine.engine import Engine

    res = Runs(tmp_path_factory.mktemp("cuda-faults"), sync_debug=True)
    eng = Engine(model=GPU_MODEL, backend="cuda", depth=2, **engine_settings(WORKLOAD))
    try:
        prepared = prepare(eng, WORKLOAD)   # also the warm-up: graphs captured, allocator grown
        for _ in range(REPEATS):
            res.run("clean", eng, prepared)
            with pageable_copy_back(eng.device):
                res.run("pageable_copy_back", eng, prepared)
            res.run("item_in_commit", eng, prepared, item_in_commit(eng))
    finally:
        eng.close()
    return res


@gpu_test
def test_a_clean_cuda_run_has_no_accidental_syncs_under_sync_debug(gpu_runs):
    for trace, report, _ in gpu_runs["clean"]:
        assert trace.header["backend"] == "cuda"
        assert [w for w in trace.waits if not w.expected] == []
        assert report.syncs == []


@gpu_test
@pytest.mark.parametrize("fault, site, reason", [
    ("pageable_copy_back", COPY_BACK_SITE, "copy-back: pageable host memory, the copy blocks the host"),   # (d)
    ("item_in_commit", ITEM_SITE, "torch sync debug: a synchronizing CUDA operation"),
], ids=["d-pageable-copy-back", "item-in-commit-sync-debug"])
def test_cuda_fault_is_detected_attributed_and_costed(gpu_runs, fault, site, reason):
    for trace, rep, _ in gpu_runs[fault]:
        assert rep.syncs and (rep.syncs[0].site, rep.syncs[0].reason) == (site, reason), rep.syncs
        assert top_host_cause(rep) == (Cause.ACCIDENTAL_SYNC, site), rep.diagnosis[:3]
    c = cost(gpu_runs, fault, "clean", Cause.ACCIDENTAL_SYNC, site)
    assert c.injected > 0.01, c
    assert c.matches(rel=0.2), (c, c.truth)


# -- without a GPU: how a sync-debug warning becomes a host wait --------------------------------

class _Recorder:
    level = 1

    def __init__(self):
        self.waits = []

    def host_wait(self, *args):
        self.waits.append(args)


class _FakeDevice:
    """What SyncDebugCapture uses of a device: its tracer and its newest enqueue time."""

    def __init__(self):
        self.tracer = _Recorder()

    def last_enqueue_ns(self) -> int:
        return 100


def _warn(capture):
    capture._show(UserWarning("called a synchronizing CUDA operation"), UserWarning, "x.py", 1)  # the site


WARN_SITE = line_of(__file__, '"x.py", 1)  # the site')


def test_a_sync_warning_is_recorded_at_its_caller_from_the_latest_enqueue():
    from photon_trace.engine.device.syncdebug import SYNC_REASON, SyncDebugCapture

    dev = _FakeDevice()
    cap = SyncDebugCapture(dev)
    _warn(cap)
    (wait,) = dev.tracer.waits
    reason, expected, t0, t1, site, step = wait
    assert (reason, expected, t0, site) == (SYNC_REASON, False, 100, WARN_SITE)
    assert t1 > t0 and cap.count == 1


def test_syncs_inside_skipped_code_and_other_warnings_are_not_recorded():
    from photon_trace.engine.device.syncdebug import SyncDebugCapture

    dev = _FakeDevice()
    cap = SyncDebugCapture(dev, skip=(_warn.__code__,))
    _warn(cap)
    shown = []
    cap._previous_show = lambda *a: shown.append(a)
    cap._show(UserWarning("something else"), UserWarning, "x.py", 1)
    assert dev.tracer.waits == [] and len(shown) == 1

