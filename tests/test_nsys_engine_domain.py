"""Our engine as Nsight Systems records it: its ``photon_trace`` NVTX domain read back as our phases
and steps, so an ``nsys profile`` of ``photon-trace bench`` gets our analysis on CUPTI's times.

No GPU or nsys here: the golden mask-upload trace (tests/data/golden) is written out as the
export nsys would make of that run (``helpers/nsys_builder.py``): each host phase an NVTX range
in the engine's domain with the step as payload, each op a kernel or copy launched by a runtime
call at its enqueue time, the mask upload's drain the pageable ``cudaMemcpyAsync`` that blocked,
the commit's wait a ``cudaEventSynchronize``. That proves the mapping consistent, not nsys: the
real exports (test_nsys_samples.py) do that.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers.nsys_builder import ExportWriter
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.telemetry.trace.importers import load_any

GOLDEN = Path(__file__).parent / "data" / "golden" / "mask-sync-pipelined.trace.jsonl"
STREAMS = {"compute": 7, "copy": 8}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    ours = load_trace(GOLDEN)
    w = ExportWriter(tmp_path_factory.mktemp("nsys") / "engine.sqlite")
    w.add_domain(1, "photon_trace")
    w.add_ranges([(h.t0, h.t1, w.string(h.phase), h.step) for h in ours.host_spans], domain_id=1)
    drains = {x.step: x for x in ours.waits if not x.expected}
    launch, copy, sync = w.string("cudaLaunchKernel_v7000"), w.string("cudaMemcpyAsync_v3020"), \
        w.string("cudaEventSynchronize_v3020")
    kernels, copies, calls = [], [], []
    for corr, d in enumerate(ours.device_spans, start=1):
        stream = STREAMS[d.stream]
        if d.op == "mask_upload":      # pageable: the call blocks until the stream drains
            x = drains[d.step]
            copies.append((d.t0, d.t1, stream, corr, 4096, 1, 0, 2))
            calls.append((x.t0, x.t1, corr, copy))
        elif d.op == "copy_back":      # pinned: asynchronous
            copies.append((d.t0, d.t1, stream, corr, 64, 2, 2, 1))
            calls.append((d.enqueued, d.enqueued + 500, corr, copy))
        else:
            kernels.append((d.t0, d.t1, stream, corr, w.string(d.op)))
            calls.append((d.enqueued, d.enqueued + 500, corr, launch))
    n = len(ours.device_spans)
    calls += [(x.t0, x.t1, n + i + 1, sync) for i, x in enumerate(ours.waits) if x.expected]
    w.add_kernels(kernels)
    w.add_memcpys(copies)
    w.add_calls(calls)
    return ours, load_any(w.close())


def test_the_engine_domain_gives_our_phases_and_steps(pair):
    ours, theirs = pair
    assert theirs.header["source"]["engine_domain"] and theirs.header["settings"]["step_annotation"] == \
        "photon_trace:launch"
    assert theirs.header["settings"]["steps_found"] == sum(1 for h in ours.host_spans if h.phase == "launch")
    nvtx = {(h.phase, h.step, h.t0, h.t1) for h in theirs.host_spans
            if theirs.header["categories"]["host"].get(h.phase) == "nvtx"}
    assert nvtx == {(h.phase, h.step, h.t0, h.t1) for h in ours.host_spans}
    assert sorted(theirs.header["host_phases"]) == ["commit", "finalize", "launch", "plan"]
    assert sorted((d.t0, d.t1, d.step) for d in theirs.device_spans) == \
        sorted((d.t0, d.t1, d.step) for d in ours.device_spans)


def test_the_commit_wait_is_expected_and_the_mask_drain_is_a_sync(pair):
    ours, theirs = pair
    expected = [w for w in theirs.waits if w.expected]
    assert len(expected) == sum(w.expected for w in ours.waits)
    assert {w.reason for w in expected} == {"commit: copy-back (cudaEventSynchronize)"}
    drains = [w for w in theirs.waits if not w.expected]
    assert len(drains) == sum(not w.expected for w in ours.waits)
    assert all("pageable host memory" in w.reason for w in drains)


def test_the_analysis_is_ours_on_the_same_window(pair):
    ours, theirs = pair
    mine = analyze(ours)
    report = analyze(theirs, mine.window)
    assert (report.busy_ns, report.idle_ns) == (mine.busy_ns, mine.idle_ns)
    assert sum(s.count for s in report.syncs) == sum(s.count for s in mine.syncs) > 0
    assert {d.cause for d in report.diagnosis} >= {"accidental_sync"}
    # one device, both streams: the device view is the same on either side
    ((dev_ours,), (dev_theirs,)) = mine.devices, report.devices
    assert (dev_theirs.device, dev_theirs.streams) == ("gpu0", 2)
    assert (dev_theirs.span_ns, dev_theirs.idle_ns) == (dev_ours.span_ns, dev_ours.idle_ns)
