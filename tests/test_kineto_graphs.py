"""CUDA graphs in profiler traces: a replay's kernels are one enqueue; a capture that never ran is
recognised, said, and not failed on idle (a real sync in it still fails).

Hand-built traces (``KinetoBuilder``) as the profiler writes them: a ``cudaGraphLaunch`` whose
kernels all carry its correlation id; a vLLM-style warm-up that captures graphs between
``cudaStreamBeginCapture`` and ``cudaStreamEndCapture`` (launches that run nothing).
"""
from __future__ import annotations

from pathlib import Path

from helpers.kineto_builder import KinetoBuilder

from photon_trace.cli import main as cli
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.attribution import GRAPH_NODES, LAUNCH_LATENCY
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, render_markdown, run_check
from photon_trace.telemetry.trace.importers import load_any

US = 1000
NODES, NODE_US, INSIDE_GAP_US = 5, 25, 22


def replay_trace(tmp_path: Path, graph: bool) -> Path:
    """Two steps, each a batch of 5 kernels 22 µs apart (a graph's dependencies, or 5 launches queued
    early), then 200 µs of host work before the next step's launch."""
    b = KinetoBuilder()
    t = 1000
    for step in range(2):
        b.annotation(f"ProfilerStep#{step}", t - 5, 400)
        start = t + 15
        if graph:
            corr = b.runtime("cudaGraphLaunch", t, 10)
        for k in range(NODES):
            ts = start + k * (NODE_US + INSIDE_GAP_US)
            if graph:     # a graph's kernel: the launch's correlation id, no call of its own
                b._x("kernel", f"node_{k}", ts, NODE_US, 7, b.device, device=0, stream=7, correlation=corr)
            else:
                b.launch(f"node_{k}", 7, t + 2 * k, 2, ts, NODE_US)
        t += 400
    return b.write(tmp_path / f"{'graph' if graph else 'eager'}.json")


def test_a_replays_kernels_are_one_enqueue_and_the_gaps_between_them_the_graphs_own(tmp_path):
    trace = load_any(replay_trace(tmp_path, graph=True))
    g = trace.header["source"]["graphs"]
    assert (g["launches"], g["replayed"], g["kernels"], g["capture_only"]) == (2, 2, 2 * NODES, False)
    assert len({d.enqueued for d in trace.device_spans}) == 2          # one enqueue per graph launch
    r = analyze(trace)
    rows = {(d.cause, d.site_or_phase): d.idle_ns for d in r.diagnosis}
    inside = 2 * (NODES - 1) * INSIDE_GAP_US * US
    assert rows[(Cause.DISPATCH, GRAPH_NODES)] == inside                # the graph's own scheduling
    assert (Cause.DISPATCH, LAUNCH_LATENCY) not in rows or rows[(Cause.DISPATCH, LAUNCH_LATENCY)] < inside
    # the same gaps between kernels launched one by one are launch latency
    eager = analyze(load_any(replay_trace(tmp_path, graph=False)))
    eager_rows = {(d.cause, d.site_or_phase) for d in eager.diagnosis}
    assert (Cause.DISPATCH, GRAPH_NODES) not in eager_rows and (Cause.DISPATCH, LAUNCH_LATENCY) in eager_rows


def capture_trace(tmp_path: Path, *, sync: bool) -> Path:
    """vLLM warming up its CUDA graphs: three captures of 40 launches each (nothing runs), a few
    memsets between them that do run, and no replay."""
    b = KinetoBuilder()
    t = 1000
    for c in range(3):
        b.launch("Memset (Device)", 7, t, 4, t + 8, 2, cat="gpu_memset", call="cudaMemsetAsync")
        t += 20
        b.runtime("cudaStreamBeginCapture", t, 3)
        for k in range(40):
            b.op("aten::mm", t + 5 + 10 * k, 8)
            b.runtime("cudaLaunchKernel", t + 6 + 10 * k, 4)
        t += 410
        b.runtime("cudaStreamEndCapture", t, 5)
        b.runtime("cudaGraphInstantiate", t + 10, 300)
        t += 2_000                                        # the device idles: nothing was meant to run
    if sync:
        b.runtime("cudaDeviceSynchronize", t, 50)
    return b.write(tmp_path / f"capture_{sync}.json")


def test_a_capture_only_trace_is_recognised_and_not_failed_on_idle(tmp_path, capsys):
    path = capture_trace(tmp_path, sync=False)
    g = load_any(path).header["source"]["graphs"]
    assert (g["captures"], g["captured_launches"], g["replayed"], g["capture_only"]) == (3, 120, 0, True)
    assert analyze(load_any(path)).idle_fraction > 0.99          # idle it is, and no verdict
    result = run_check(path)
    assert result.exit_code == EXIT_PASS
    idle = next(g for g in result.gates if g.name == "idle_fraction")
    assert idle.passed and idle.message.startswith("not gated: a CUDA-graph capture only (3 capture(s) recorded "
                                                   "120 launches, no graph ran")
    assert "CUDA-graph capture only" in render_markdown(result)
    assert cli(["import", str(path)]) == 0
    assert "CUDA-graph capture only: 3 capture(s) recorded 120 launches into graphs and no graph ran" in \
        capsys.readouterr().out


def test_a_real_sync_in_a_capture_only_trace_still_fails(tmp_path):
    result = run_check(capture_trace(tmp_path, sync=True))
    assert result.exit_code == EXIT_FAIL
    assert [g.name for g in result.failures] == ["accidental_syncs"]
    assert "cudaDeviceSynchronize" in result.failures[0].message


def test_a_capture_with_no_device_op_at_all_is_checked_on_its_syncs(tmp_path):
    b = KinetoBuilder()
    b.runtime("cudaStreamBeginCapture", 1000, 3)
    b.runtime("cudaLaunchKernel", 1010, 4)
    b.runtime("cudaStreamEndCapture", 1020, 3)
    assert run_check(b.write(tmp_path / "bare.json")).exit_code == EXIT_PASS


def test_a_capture_only_baseline_is_bad_input_not_a_silent_pass(tmp_path):
    """A capture has no steady state: as a baseline the regression gates would have nothing to
    compare with and vanish, so it is refused, naming why."""
    result = run_check(replay_trace(tmp_path, graph=True), capture_trace(tmp_path, sync=False), max_idle_fraction=1)
    assert result.exit_code == EXIT_BAD_INPUT and "baseline: a CUDA-graph capture only" in result.error
