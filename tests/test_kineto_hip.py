"""ROCm traces read as CUDA's twins: HIP's syncs, blocking copies and launches, under the categories
Kineto writes for ROCm (``cuda_runtime``), and a runtime the importer does not know said to be unknown.

Real traces: HTA's MI250 training step (ROCm 6.2, committed), and the same Hugging Face Qwen program
profiled on an H100 and on an MI300X (``/work/shared/kineto-samples``, NOTICE.md there; their
metadata carries a credential, so they are read in place, not copied here).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers.kineto_builder import KinetoBuilder

from photon_trace.cli import main as cli
from photon_trace.dashboard.panels import figures
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, EXIT_FAIL, run_check
from photon_trace.telemetry.trace.importers import load_any

DATA = Path(__file__).parent / "data" / "kineto"
MI250 = DATA / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
SAMPLES = Path("/work/shared/kineto-samples")
H100, MI300X = SAMPLES / "hf_qwen1.5-0.5b_h100.json.gz", SAMPLES / "hf_qwen1.5-0.5b_mi300x.json.gz"
needs_samples = pytest.mark.skipif(not (H100.exists() and MI300X.exists()), reason="kineto-samples not here")


def test_a_rocm_trace_has_its_blocking_copies_and_device_sync_as_host_waits():
    trace = load_any(MI250)
    assert trace.header["source"]["runtime"]["name"] == "HIP"
    reasons = sorted(w.reason for w in trace.waits)
    # its two .to() copies are hipMemcpyWithStream (PyTorch's blocking copy on ROCm), and one device sync
    assert reasons == ["hipDeviceSynchronize: waits for the whole device"] + \
        ["hipMemcpyWithStream: waits for a blocking copy on a stream"] * 2
    assert all(w.site == "aten::to > aten::copy_" for w in trace.waits if "Memcpy" in w.reason)


@needs_samples
def test_the_same_program_on_h100_and_mi300x_gets_the_same_verdicts(capsys):
    h100, mi300x = load_any(H100), load_any(MI300X)
    assert (h100.header["source"]["runtime"]["name"], mi300x.header["source"]["runtime"]["name"]) == ("CUDA", "HIP")
    # the harness's two device syncs and the .item() copy, on each runtime
    kinds = lambda t: sorted(w.reason.split(":")[0] for w in t.waits)  # noqa: E731
    assert kinds(h100) == ["cudaDeviceSynchronize", "cudaDeviceSynchronize", "cudaStreamSynchronize"]
    assert kinds(mi300x) == ["hipDeviceSynchronize", "hipDeviceSynchronize", "hipMemcpyWithStream"]
    sites = lambda t: sorted(w.site for w in t.waits)  # noqa: E731
    assert sites(h100) == sites(mi300x)                # the same lines of the same program
    a, b = run_check(H100), run_check(MI300X)
    assert a.exit_code == b.exit_code == EXIT_FAIL
    assert [(g.name, g.passed, g.value) for g in a.gates if g.name == "accidental_syncs"] == \
        [(g.name, g.passed, g.value) for g in b.gates if g.name == "accidental_syncs"] == [("accidental_syncs", False, 3)]
    assert [g.passed for g in a.gates] == [g.passed for g in b.gates]
    assert cli(["import", str(MI300X)]) == 0
    assert "3 host wait(s) on the device (runtime: HIP)" in capsys.readouterr().out


def _hip_copy(tmp_path: Path, *, call_end: float, busy_until: float) -> Path:
    """A kernel on stream 0 running to ``busy_until``, then a hipMemcpyAsync DtoH whose copy runs
    after it; the call returns at ``call_end``. ROCm names the host memory "Host" either way."""
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 990.0, 400.0)
    b.launch("gemm", 0, 1000.0, 5.0, 1010.0, busy_until - 1010.0, call="hipLaunchKernel")
    b.launch("Memcpy DtoH (Device -> Host)", 0, 1020.0, call_end - 1020.0, busy_until + 2.0, 3.0,
             cat="gpu_memcpy", call="hipMemcpyAsync", bytes=4)
    return b.write(tmp_path / f"hip_{call_end}.json")


def test_a_hip_async_copy_that_waited_for_the_stream_is_a_host_wait(tmp_path):
    waited = load_any(_hip_copy(tmp_path, call_end=1207.0, busy_until=1200.0))    # returned after its copy
    assert [w.reason.split(":")[0] for w in waited.waits] == ["hipMemcpyAsync"]
    assert "pageable" in waited.waits[0].reason
    queued = load_any(_hip_copy(tmp_path, call_end=1025.0, busy_until=1200.0))    # returned at once: pinned
    assert queued.waits == []


def _foreign(tmp_path: Path) -> Path:
    """An XPU trace: its runtime calls under Kineto's xpu_runtime category, kernels on a queue."""
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 990, 500)
    for i in range(4):
        corr = 500 + i
        b._x("xpu_runtime", "urEnqueueKernelLaunch", 1000 + 50 * i, 5, correlation=corr)
        b._x("kernel", f"xpu_kernel_{i}", 1010 + 50 * i, 20, 7, b.device, device=0, stream=7, correlation=corr)
    b._x("xpu_runtime", "urQueueFinish", 1300, 40, correlation=600)
    return b.write(tmp_path / "xpu.json")


def test_an_unknown_runtime_is_said_to_be_unknown_never_zero_host_waits(tmp_path, capsys):
    path = _foreign(tmp_path)
    trace = load_any(path)
    runtime = trace.header["source"]["runtime"]
    assert runtime["name"] == "unknown" and "xpu_runtime" in runtime["why"]
    assert cli(["import", str(path)]) == 0
    out = capsys.readouterr().out
    assert "host waits on the device: unknown" in out and "0 host wait(s)" not in out
    checked = run_check(path, max_idle_fraction=1.0)
    assert checked.exit_code == EXIT_BAD_INPUT and "accidental-sync gate cannot decide" in checked.error
    # the dashboard's card and its A/B table say so too
    report = analyze(trace)
    assert "xpu_runtime" in report.syncs_unknown
    cards = {i["key"]: i["value"] for i in figures.summary_items(report)}
    assert cards["accidental_syncs"] == "unknown"
    row = next(r for r in figures.compare_rows(report, report) if r["metric"] == "accidental syncs")
    assert row["A"] == row["B"] == "–"


def test_a_cpu_trace_has_no_runtime_and_no_claim_about_one(tmp_path):
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 990, 500)
    b.op("aten::mm", 1000, 100)
    assert load_any(b.write(tmp_path / "cpu.json")).header["source"]["runtime"]["name"] is None
