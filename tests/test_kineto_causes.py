"""Each bubble cause on a profiler trace built to have exactly one of each (times in µs).

    host    aten::nonzero [140-245] launches K2 at 240; K3 at 260, NCCL at 270, cudaStreamWaitEvent
            at 275, K4 at 280; cudaDeviceSynchronize [290-520] inside "## log_metrics ##"; K5 at 600
    s7      K1 [110-150]  K2 [250-300]  K3 [340-380]  K4 [485-520]  K5 [610-640]
    s23                   NCCL [300-------------------480]

    [150-240] host-bound: K2 was launched at 240, the host was in aten::nonzero (the only top-level op)
    [240-250] launch latency: K2 queued at 240, started at 250
    [300-340] launch latency: K3 was queued at 260 and started late (NCCL ran meanwhile)
    [380-485] stream wait: K4 (queued at 280) waited for the NCCL kernel on stream 23
    [520-600] sync: the host sat in cudaDeviceSynchronize [290-520] (w = 230 µs), then took 80 µs
              to launch K5 at 600: without the wait K5 would have been launched up to 230 µs earlier
    [600-610] launch latency: K5 queued at 600, started at 610

The device's own launch latency (``queued_gap_ns``) is measured on [300-340], the only gap
before an op already queued that is not a wait on another stream (K4's gap waits for NCCL):
40 µs. The queued parts of [150-250] and [520-610] (10 µs each) are under it: all dispatch.
"""
from __future__ import annotations

import pytest

from photon_trace.cli import main as cli
from photon_trace.telemetry.analysis import Cause, analyze
from photon_trace.telemetry.analysis.bubbles import LAUNCH_LATENCY
from photon_trace.telemetry.analysis.gate import EXIT_FAIL, EXIT_PASS, run_check
from photon_trace.telemetry.trace.importers import load_any
from helpers.kineto_builder import KinetoBuilder

US = 1000
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float"


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    b = KinetoBuilder()
    b.annotation("ProfilerStep#7", 0, 700)
    b.launch("K1", 7, 100, 5, 110, 40)
    b.op("aten::nonzero", 140, 105)
    b.launch("K2", 7, 240, 4, 250, 50)
    b.launch("K3", 7, 260, 4, 340, 40)
    b.launch(NCCL, 23, 270, 4, 300, 180)
    corr = b.runtime("cudaStreamWaitEvent", 275, 2)
    b.sync_record("Wait Event", 275, 0, corr, stream=7, wait_on_stream=23)
    b.launch("K4", 7, 280, 4, 485, 35)
    b.annotation("## log_metrics ##", 288, 235)
    corr = b.runtime("cudaDeviceSynchronize", 290, 230)
    b.sync_record("Context Sync", 290, 230, corr)
    b.launch("K5", 7, 600, 4, 610, 30)
    return b.write(tmp_path_factory.mktemp("causes") / "causes.json")


def test_each_gap_gets_its_cause_and_what_covered_it(path):
    r = analyze(load_any(path))
    got = [(b.t0 // US, b.t1 // US, b.cause, b.detail, b.covered_ns // US, b.covered_by) for b in r.bubbles]
    assert got == [
        (150, 240, Cause.HOST_BOUND, "aten::nonzero", 0, ""),
        (240, 250, Cause.DISPATCH, LAUNCH_LATENCY, 0, ""),          # K2 queued at 240, started at 250
        (300, 340, Cause.DISPATCH, LAUNCH_LATENCY, 40, "gpu0 stream 23"),
        # the whole queued part: K4 was queued at 280, before the gap opened
        (380, 485, Cause.STREAM_WAIT, f"gpu0 stream 23: {NCCL}", 100, "gpu0 stream 23"),
        # the wait ended as the gap opened; the host work after it [520-600] (no op, in the step's
        # annotation) is within the wait's 230 µs, so the sync is charged all of it
        (520, 600, Cause.ACCIDENTAL_SYNC, "## log_metrics ##", 0, ""),
        (600, 610, Cause.DISPATCH, LAUNCH_LATENCY, 0, ""),          # K5 queued at 600, started at 610
    ]
    assert r.stream == "gpu0 stream 7" and r.window == (110 * US, 640 * US)
    assert r.queued_gap_ns == 40 * US                         # [300-340]: K3 queued at 260
    # the part of each gap before its op was launched: 90 (to 240) and 80 (to 600) µs
    assert r.host_idle_ns == 170 * US
    (sync,) = r.syncs
    assert (sync.site, sync.count, sync.wait_ns, sync.idle_ns) == ("## log_metrics ##", 1, 230 * US, 80 * US)
    assert sync.reason == "cudaDeviceSynchronize: waits for the whole device"


def test_the_other_stream_is_analysed_too(path):
    trace = load_any(path)
    assert trace.header["source"]["device_waits"] == 1     # the cudaStreamWaitEvent
    s7, s23 = analyze(trace).streams
    assert (s7.stream, s7.span_ns, s7.busy_ns, s7.idle_ns, s7.covered_ns) == ("gpu0 stream 7", 530 * US, 195 * US,
                                                                              335 * US, 140 * US)
    # the bubbles above by cause: dispatch 10 + 40 + 10 (the launch latencies), the rest one bubble each
    assert s7.causes == {Cause.HOST_BOUND: 90 * US, Cause.DISPATCH: 60 * US, Cause.STREAM_WAIT: 105 * US,
                         Cause.ACCIDENTAL_SYNC: 80 * US}
    assert (s23.stream, s23.ops, s23.busy_ns, s23.idle_ns) == ("gpu0 stream 23", 1, 180 * US, 0)


def test_the_gate_on_a_profiler_trace(path, tmp_path, capsys):
    assert run_check(path, max_idle_fraction=0.9).exit_code == EXIT_FAIL          # the sync
    allowed = run_check(path, max_idle_fraction=0.9, allow_syncs=("*log_metrics*",))
    assert allowed.exit_code == EXIT_PASS and "allowed: ## log_metrics ## x1" in allowed.gates[1].message
    md = tmp_path / "gate.md"
    assert cli(["check", str(path), "--max-idle", "0.5", "--markdown", str(md)]) == EXIT_FAIL
    assert "accidental_sync" in md.read_text() and "## log_metrics ##" in md.read_text()
    assert cli(["check", str(path), "--max-idle", "0.9", "--allow-sync", "*log_metrics*"]) == EXIT_PASS
