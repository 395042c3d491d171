"""The small real GPU trace (an A100, 92 events, one ProfilerStep), read event by event.

Every expectation below was written by reading the trace's events (their indices in
``traceEvents`` are given) and is first checked against the raw JSON, so the importer is
compared with the file, not with itself. Timestamps are integer µs since the epoch;
``us(512145)`` is 1707417525512145 µs as integer ns.

The program: ``torch.ones`` (a fill kernel), ``.sum()`` (a reduce kernel), ``> 0`` (a
compare kernel), then ``if tensor:`` (``aten::is_nonzero`` > ``aten::item`` >
``aten::_local_scalar_dense``: a device-to-host copy into *pageable* memory and a
``cudaStreamSynchronize``), a spin kernel between two ``cudaEventRecord``s, then
``cudaEventSynchronize``, ``cudaEventQuery``, ``cudaEventElapsedTime`` and
``cudaDeviceSynchronize`` straight from Python (no op around them).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from photon_trace.telemetry.analysis import Cause, analyze, sync_sites
from photon_trace.telemetry.analysis.bubbles import LAUNCH_LATENCY
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.records import DeviceSpan

PATH = Path(__file__).parent / "data" / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz"
RAW = json.loads(gzip.decompress(PATH.read_bytes()))["traceEvents"]
STREAM = "gpu0 stream 7"
THREAD = "thread 948300 (python3.10)"
ITEM_SITE = "aten::is_nonzero > aten::_local_scalar_dense"
IN_STEP = "outside phases (in ProfilerStep#100)"     # Python between ops: no top-level op covers it


def us(offset: int) -> int:
    return (1_707_417_525_000_000 + offset) * 1000


# (index, cat, name prefix, ts - 1707417525000000, dur µs) of every event the expectations use.
EVENTS = [
    (0, "user_annotation", "ProfilerStep#100", 509335, 3154),
    (8, "cpu_op", "aten::is_nonzero", 512245, 47),
    (9, "cpu_op", "aten::item", 512247, 45),
    (10, "cpu_op", "aten::_local_scalar_dense", 512249, 42),
    (11, "kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor", 512145, 1),
    (13, "cuda_runtime", "cudaLaunchKernel", 512110, 36),
    (15, "kernel", "void at::native::reduce_kernel", 512194, 11),
    (17, "cuda_runtime", "cudaLaunchKernel", 512182, 10),
    (19, "kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::compare_scalar", 512235, 1),
    (21, "cuda_runtime", "cudaLaunchKernel", 512221, 12),
    (23, "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 512270, 2),
    (25, "cuda_runtime", "cudaMemcpyAsync", 512252, 29),
    (27, "cuda_sync", "Stream Sync", 512283, 5),
    (29, "cuda_runtime", "cudaStreamSynchronize", 512282, 6),
    (33, "kernel", "at::cuda::(anonymous namespace)::spin_kernel", 512372, 36),
    (35, "cuda_runtime", "cudaLaunchKernel", 512362, 9),
    (39, "cuda_sync", "Event Sync", 512383, 33),
    (41, "cuda_runtime", "cudaEventSynchronize", 512382, 34),
    (43, "cuda_sync", "Event Sync", 512419, 2),
    (45, "cuda_runtime", "cudaEventQuery", 512419, 3),
    (49, "cuda_sync", "Context Sync", 512475, 6),
    (51, "cuda_runtime", "cudaDeviceSynchronize", 512474, 8),
]


@pytest.fixture(scope="module")
def trace():
    return load_any(PATH)


@pytest.fixture(scope="module")
def report(trace):
    return analyze(trace)


def test_the_events_the_expectations_come_from_are_in_the_file():
    for i, cat, name, ts, dur in EVENTS:
        e = RAW[i]
        assert (e["cat"], e["ts"] - 1_707_417_525_000_000, e["dur"]) == (cat, ts, dur), i
        assert e["name"].startswith(name), i
    # each launch and its kernel share a correlation id
    for launch, op in ((13, 11), (17, 15), (21, 19), (25, 23), (35, 33)):
        assert RAW[launch]["args"]["correlation"] == RAW[op]["args"]["correlation"]
    assert len(RAW) == 92 and sum(e.get("cat") in ("kernel", "gpu_memcpy") for e in RAW) == 5


def test_every_synchronising_call_is_a_host_wait_with_its_site(trace):
    got = [(w.t0, w.t1, w.site, w.step, w.expected) for w in trace.waits]
    assert got == [
        (us(512252), us(512281), ITEM_SITE, 100, False),          # event 25: the pageable copy of .item()
        (us(512282), us(512288), ITEM_SITE, 100, False),          # event 29: cudaStreamSynchronize in it
        (us(512382), us(512416), "ProfilerStep body", 100, False),  # event 41: no op around it
        (us(512474), us(512482), "ProfilerStep body", 100, False),  # event 51
    ]
    reasons = [w.reason for w in trace.waits]
    assert reasons[0].startswith("cudaMemcpyAsync: DtoH (Device -> Pageable) copies pageable host memory (1 B)")
    assert reasons[1] == "cudaStreamSynchronize: waits for a stream (stream 7)"       # event 27's stream
    assert reasons[2] == "cudaEventSynchronize: waits for an event (stream 7)"        # event 39's wait_on_stream
    assert reasons[3] == "cudaDeviceSynchronize: waits for the whole device"
    # the host waited 29 + 6 + 34 + 8 µs; cudaEventQuery (45) polls, even with a cuda_sync record (43)
    assert sum(w.t1 - w.t0 for w in trace.waits) == 77_000


def test_device_ops_are_linked_to_the_calls_that_launched_them(trace):
    ops = [(d.stream, d.t0, d.t1, d.enqueued, d.step) for d in trace.device_spans]
    assert ops == [(STREAM, us(a), us(a + d), us(launch), 100) for a, d, launch in (
        (512145, 1, 512110), (512194, 11, 512182), (512235, 1, 512221), (512270, 2, 512252), (512372, 36, 512362))]
    assert trace.device_spans[3].op == "Memcpy DtoH (Device -> Pageable)"


def test_host_lanes_steps_and_clock(trace):
    assert {h.thread for h in trace.host_spans} == {THREAD}
    cats = trace.header["categories"]["host"]
    kinds = [cats[h.phase] for h in trace.host_spans]
    assert (kinds.count("annotation"), kinds.count("cpu op"), kinds.count("cuda runtime")) == (1, 10, 12)
    assert [s.step for s in trace.steps] == [100] and trace.header["settings"]["steps_found"] == 1
    assert trace.header["source"]["resolution_ns"] == 1000            # integer µs timestamps
    assert trace.header["primary_stream"] == STREAM
    assert trace.header["device"]["name"] == "NVIDIA A100-PG509-200"
    assert sorted(trace.header["host_phases"]) == ["aten::gt", "aten::is_nonzero", "aten::ones", "aten::sum"]


def test_every_bubble_and_its_cause(report):
    # Gaps on stream 7, each closed by an op launched after the gap opened (the host was late). Each
    # is split by what the host was doing until that launch (a top-level op: the trace's host
    # phases; else the innermost span around it), then launch latency from the launch to the op's
    # start: the trace has no gap before an op already queued to measure the device's own latency
    # by, so all of that stays dispatch.
    # 512146-512194: aten::ones ends at 512150, Python until aten::sum (512159-512198), launch at 512182;
    # 512205-512235: in aten::gt (512205-512238) to the launch at 512221;
    # 512236-512270: the rest of aten::gt, Python, aten::is_nonzero (512245-) to the cudaMemcpyAsync at 512252;
    # 512272-512372: the .item() waits are the copy (512252-512281, w 29) and the stream sync
    # (512282-512288, w 6): 35 µs of host time the launch at 512362 would have come earlier without.
    # The copy's own stretch in the gap is 512272-512281 (9 µs); it is charged the host work after it
    # up to 20 µs more (512281-512282 and 512288-512292 in aten::is_nonzero, then 512292-512307), the
    # stream sync its own 6 µs (512282-512288): 512272-512307 in all. The rest until the launch is
    # Python in the step (a cudaEventRecord at 512352-512355), not the sync's.
    assert [(b.t0, b.t1, b.cause, b.detail) for b in report.bubbles] == [
        (us(512146), us(512150), Cause.HOST_BOUND, "aten::ones"),
        (us(512150), us(512159), Cause.HOST_BOUND, IN_STEP),
        (us(512159), us(512182), Cause.HOST_BOUND, "aten::sum"),
        (us(512182), us(512194), Cause.DISPATCH, LAUNCH_LATENCY),
        (us(512205), us(512221), Cause.HOST_BOUND, "aten::gt"),
        (us(512221), us(512235), Cause.DISPATCH, LAUNCH_LATENCY),
        (us(512236), us(512238), Cause.HOST_BOUND, "aten::gt"),
        (us(512238), us(512245), Cause.HOST_BOUND, IN_STEP),
        (us(512245), us(512252), Cause.HOST_BOUND, "aten::is_nonzero"),
        (us(512252), us(512270), Cause.DISPATCH, LAUNCH_LATENCY),
        (us(512272), us(512307), Cause.ACCIDENTAL_SYNC, ITEM_SITE),
        (us(512307), us(512352), Cause.HOST_BOUND, IN_STEP),
        (us(512352), us(512355), Cause.HOST_BOUND, "outside phases (in cudaEventRecord)"),
        (us(512355), us(512362), Cause.HOST_BOUND, IN_STEP),
        (us(512362), us(512372), Cause.DISPATCH, LAUNCH_LATENCY),
    ]
    assert report.queued_gap_ns == 0          # no op was already queued when the device ran dry
    assert report.window == (us(512145), us(512408))
    assert (report.window_ns, report.busy_ns, report.idle_ns) == (263_000, 51_000, 212_000)
    # the part of each gap before the next op was launched: 36 + 16 + 16 + 90 µs
    assert (report.host_idle_ns, report.launch_idle_ns) == (158_000, 54_000)
    assert report.stream == STREAM and len(report.streams) == 1


def test_syncs_by_site_with_what_they_cost(trace, report):
    # In the window (stream 7's ops, 512145-512408): the cudaDeviceSynchronize at 512474 is after it.
    assert [(s.site, s.count, s.wait_ns, s.idle_ns) for s in report.syncs] == [
        (ITEM_SITE, 2, 35_000, 35_000),        # charged its waits' length: 29 + 6 µs (see the bubbles)
        ("ProfilerStep body", 1, 34_000, 0),   # the event sync ran beside the spin kernel: no idle
    ]
    whole = sync_sites(trace, report.bubbles)
    assert [(s.site, s.count, s.wait_ns) for s in whole] == [(ITEM_SITE, 2, 35_000), ("ProfilerStep body", 2, 42_000)]


def test_the_step_and_the_diagnosis(report):
    (step,) = report.steps
    assert (step.step, step.period_ns, step.idle_ns, step.forward_ns) == (100, 263_000, 212_000, 51_000)
    # Most idle: Python between ops in the step body (9 + 7 + 45 + 7 µs of bubbles); removing it
    # would move each launch earlier by the Python time since the previous launch, each less than
    # its gap's host-late part: 9, 7 (512198-512205, before the second gap opened), 7 and 67
    # (512292-512352, 512355-512362): 90 µs of the window.
    top = report.diagnosis[0]
    assert (top.cause, top.site_or_phase, top.idle_ns) == (Cause.HOST_BOUND, IN_STEP, 68_000)
    assert top.predicted_speedup == pytest.approx(263 / 173)
    # the .item() sync: its 35 µs of waits, all in the host's path to the spin kernel's launch
    sync = next(d for d in report.diagnosis if d.cause == Cause.ACCIDENTAL_SYNC)
    assert (sync.site_or_phase, sync.idle_ns) == (ITEM_SITE, 35_000)
    assert sync.predicted_speedup == pytest.approx(263 / 228)
    assert sum(d.idle_ns for d in report.diagnosis) == 212_000


def test_the_whole_file_as_device_spans():
    """The importer's device spans are exactly the kernel and memcpy events, field by field."""
    tr = load_any(PATH)
    raw = [e for e in RAW if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert tr.device_spans == [DeviceSpan(STREAM, e["name"], 100, 0, e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000,
                                          next(r["ts"] for r in RAW if r.get("cat") == "cuda_runtime"
                                               and r["args"]["correlation"] == e["args"]["correlation"]) * 1000)
                               for e in sorted(raw, key=lambda e: e["ts"])]


def test_without_correlation_ids_the_ac2g_flows_link_each_op_to_its_launch(tmp_path):
    """Older or filtered traces may lack args.correlation; the flow events (ph s/f, cat ac2g) still link."""
    doc = json.loads(gzip.decompress(PATH.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy"):
            del e["args"]["correlation"]
    p = tmp_path / "no_correlation.json"
    p.write_text(json.dumps(doc))
    flows = load_any(p)
    assert flows.header["source"]["unlinked"] == 0
    assert [d.enqueued for d in flows.device_spans] == [d.enqueued for d in load_any(PATH).device_spans]
