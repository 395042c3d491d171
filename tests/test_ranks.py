"""A folder (or several files) of one trace per rank: aligned on their clocks, analysed per rank and
across ranks (the slowest rank per step, collective waits against transfers, HTA's overlap).

Three jobs: hand-built ranks whose clocks differ by their base times (the figures are known by
construction); HTA's two-rank trace_filter folder (its overlap per rank computed by HTA itself);
and a real 2-rank DistributedDataParallel job on gloo profiled on this CPU
(``scripts/profile_gloo_ranks.py``: rank 1 does 8x the work, so rank 0 waits for it).
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from helpers.kineto_builder import KinetoBuilder

from photon_trace.cli import main as cli
from photon_trace.telemetry.analysis.ranks import analyze_ranks, comm_comp_overlap
from photon_trace.telemetry.trace.file import TraceFormatError, load_trace, write_trace
from photon_trace.telemetry.trace.importers.rank_files import load_ranks
from photon_trace.telemetry.trace.ranks import is_ranks, split_ranks

DATA = Path(__file__).parent / "data"
HTA_RANKS = [DATA / "kineto" / "trace_filter_sampled_rank-0.json.gz", DATA / "kineto" / "trace_filter_sampled_rank-1.json.gz"]
GLOO = DATA / "ranks" / "gloo_ddp_cpu"
BASE = 1_700_000_000_000_000_000
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
US = 1000


def rank_trace(tmp_path: Path, rank: int, *, base_shift_s: int, host: str, arrive_us: float) -> Path:
    """One rank of a 2-rank job: a step of compute kernels, then an all-reduce that starts at
    ``arrive_us`` and ends at 600 µs, on the job's clock (µs after the job's origin). The rank's
    own timestamps are relative to its base time, ``base_shift_s`` later than the job's."""
    b = KinetoBuilder(pid=100 + rank, tid=100 + rank, device=rank)
    own = lambda us: 5_000_000.0 + us - base_shift_s * 1e6  # noqa: E731  (µs on this rank's clock)
    b.annotation("ProfilerStep#5", own(0.0), 700.0)
    end = 10.0
    for k in range(4):
        b.launch(f"gemm_{k}", 7, own(5.0 + k), 1.0, own(end), 20.0)
        end += 22.0
    b.launch(NCCL, 20, own(arrive_us - 10), 2.0, own(arrive_us), 600.0 - arrive_us)
    meta = {"baseTimeNanoseconds": BASE + base_shift_s * 1_000_000_000, "host_name": host,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}
    return b.write(tmp_path / f"node-{rank}.pt.trace.json.gz", **meta)


def job(tmp_path: Path, hosts=("node1", "node1")) -> list[Path]:
    return [rank_trace(tmp_path, 0, base_shift_s=0, host=hosts[0], arrive_us=100.0),
            rank_trace(tmp_path, 1, base_shift_s=1, host=hosts[1], arrive_us=400.0)]


def test_ranks_are_aligned_on_their_base_times_and_the_straggler_is_found(tmp_path):
    trace = load_ranks(job(tmp_path))
    assert [e["rank"] for e in trace.header["ranks"]] == [0, 1]
    rr = analyze_ranks(trace)
    (c,) = rr.collectives
    assert c.kind == "AllReduce" and c.last == 1
    assert (c.wait_ns(0), c.transfer_ns(0)) == (300 * US, 200 * US)     # rank 0 waited for rank 1
    assert (c.wait_ns(1), c.transfer_ns(1)) == (0, 200 * US)
    assert c.end_spread_ns == 0                 # one second apart in the files, one moment on the job's clock
    assert [(w.rank, w.last, w.wait_ns) for w in rr.waits] == [(0, 0, 300 * US), (1, 1, 0)]
    (step,) = rr.steps
    assert step.durations == {0: 700 * US, 1: 700 * US}
    assert step.work == {0: 400 * US, 1: 700 * US} and step.slowest == 1
    # whole-µs timestamps: the clock's resolution, 1 µs, is the alignment's error on one host
    assert rr.alignment["same_host"] is True and rr.error_ns == 1000 and rr.alignment["measured_ns"] == 0
    assert "one host (node1): one clock, to 1.0 µs" in rr.alignment_text()


def test_ranks_on_different_hosts_have_their_clock_error_measured(tmp_path):
    rr = analyze_ranks(load_ranks(job(tmp_path, hosts=("node1", "node2"))))
    assert rr.alignment["same_host"] is False and rr.alignment["error_ns"] is None
    assert rr.error_ns == 0 == rr.alignment["measured_ns"]
    assert "2 hosts: the offset between their clocks is not in the files" in rr.alignment_text()


def test_a_job_merged_is_split_back_and_reloads_as_a_job(tmp_path):
    paths = job(tmp_path)
    trace = load_ranks(paths)
    lanes = sorted({d.stream for d in trace.device_spans})
    assert lanes == ["rank 0 · gpu0 stream 20", "rank 0 · gpu0 stream 7", "rank 1 · gpu1 stream 20",
                     "rank 1 · gpu1 stream 7"]
    back = dict(split_ranks(trace))
    assert sorted({d.stream for d in back[1].device_spans}) == ["gpu1 stream 20", "gpu1 stream 7"]
    saved = load_trace(write_trace(trace, tmp_path / "job.trace.jsonl"))
    assert is_ranks(saved) and analyze_ranks(saved).waits == analyze_ranks(trace).waits


def test_bad_rank_folders_are_bad_input(tmp_path, capsys):
    a, b = job(tmp_path)
    dup = tmp_path / "dup"
    dup.mkdir()
    shutil.copy(a, dup / "x.json.gz")
    shutil.copy(a, dup / "y.json.gz")
    with pytest.raises(TraceFormatError, match=r"x\.json\.gz and .*y\.json\.gz are both rank 0"):
        load_ranks([dup])
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(a, one / "a.json.gz")
    with pytest.raises(TraceFormatError, match="ranks need two traces or more"):
        load_ranks([one])
    assert cli(["import", "--json", str(tmp_path / "empty_nothing")]) == 2
    assert json.loads(capsys.readouterr().out)["exit"] == 2


def test_the_cli_imports_and_checks_a_folder_of_ranks(tmp_path, capsys):
    folder = tmp_path / "job"
    folder.mkdir()
    for p in job(tmp_path):
        shutil.copy(p, folder / p.name)
    assert cli(["import", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "2 ranks: node-0.pt.trace.json.gz, node-1.pt.trace.json.gz" in out
    assert "step 5: rank 1 slowest, by 0.300 ms" in out
    assert "rank 0: arrived last at 0 of 1; waited 0.300 ms, transfer 0.200 ms" in out
    assert cli(["import", "--json", str(folder)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["collectives"][0]["last"] == 1 and doc["steps"][0]["slowest"] == 1
    assert cli(["check", str(folder), "--max-idle", "1.0"]) == 0
    assert cli(["check", str(folder), "--baseline", str(folder)]) == 2


def test_htas_two_rank_folder_gets_htas_overlap_per_rank(tmp_path):
    """HTA's get_comm_comp_overlap on its own trace_filter folder, against ours on the same kernels
    (HTA keeps those launched before the last ProfilerStep)."""
    import logging

    from helpers.hta_compare import hta_window
    from hta.trace_analysis import TraceAnalysis
    logging.getLogger("hta").setLevel(logging.ERROR)
    folder = tmp_path / "trace_filter"
    folder.mkdir()
    for p in HTA_RANKS:
        shutil.copy(p, folder / p.name)
    hta = TraceAnalysis(trace_dir=str(folder)).get_comm_comp_overlap(visualize=False)
    theirs = dict(zip(hta["rank"], hta["comp_comm_overlap_pctg"]))
    trace = load_ranks(HTA_RANKS)                 # several files, as given
    ours = {r: 100 * comm_comp_overlap(hta_window(t)) for r, t in split_ranks(trace)}
    assert theirs == {0: 11.81, 1: 20.05}
    assert ours == pytest.approx(theirs, abs=0.005)
    assert load_ranks([folder]).header["ranks"] == trace.header["ranks"]   # the folder, the same job


def test_the_gloo_job_finds_rank_1_holding_rank_0_at_every_all_reduce():
    trace = load_ranks([GLOO])
    rr = analyze_ranks(trace)
    assert [r.rank for r in rr.ranks] == [0, 1] and all(r.device_ops == 0 for r in rr.ranks)
    assert rr.alignment["same_host"] is True and rr.alignment["hosts"] == ["vm"]
    assert len(rr.collectives) == 12 and {c.kind for c in rr.collectives} == {"all_reduce"}
    assert all(c.last == 1 for c in rr.collectives)
    w0, w1 = rr.waits
    assert w1.wait_ns == 0 and w0.wait_ns > 3 * w0.transfer_ns          # rank 0 mostly waits
    assert all(s.slowest == 1 for s in rr.steps) and len(rr.steps) == 6
    # independently of our reader: rank 0's first all-reduce began that long before rank 1's
    starts = [sorted(e["ts"] for e in json.loads(gzip.decompress(p.read_bytes()))["traceEvents"]
                     if e.get("name") == "gloo:all_reduce")[0] for p in sorted(GLOO.iterdir())]
    bases = [json.loads(gzip.decompress(p.read_bytes()))["baseTimeNanoseconds"] for p in sorted(GLOO.iterdir())]
    expect = (starts[1] - starts[0]) * 1000 + (bases[1] - bases[0])
    assert rr.collectives[0].wait_ns(0) == pytest.approx(expect, abs=2)


def test_nsight_exports_are_ranks_too(tmp_path):
    src = DATA / "nsys" / "pipit_saxpy0.sqlite.gz"
    for r in (0, 1):
        shutil.copy(src, tmp_path / f"saxpy_rank{r}.sqlite.gz")
    trace = load_ranks([tmp_path])
    assert [e["rank"] for e in trace.header["ranks"]] == [0, 1]
    assert "the Nsight session's start (wall clock) + ns since it" in trace.header["alignment"]["clocks"]
    rr = analyze_ranks(trace)
    assert rr.ranks[0].idle_fraction == pytest.approx(rr.ranks[1].idle_fraction)
    assert rr.ranks[0].syncs == 15


DDP = Path("/work/shared/kineto-samples/ddp_rank0_nccl_a100.json.gz")


@pytest.mark.skipif(not DDP.exists(), reason="kineto-samples not here")
def test_the_ddp_rank_gets_htas_overlap_and_its_nccl_waits_are_the_devices(tmp_path, monkeypatch):
    """Rank 0 of a real DDP job on A100s (NCCL all-reduces on stream 40; read in place, NOTICE.md
    there). HTA rounds a ns-resolution trace's events inward to whole µs (start up, end down)
    unless HTA_DISABLE_NS_ROUNDING=1: on the exact times it agrees with ours, and ours on the
    times rounded its way gives its default figure."""
    import dataclasses
    import logging

    from helpers.hta_compare import hta_window
    from hta.trace_analysis import TraceAnalysis

    from photon_trace.telemetry.analysis import analyze
    from photon_trace.telemetry.analysis.causes import DEVICE_SIDE, Cause
    from photon_trace.telemetry.trace.importers import load_any
    logging.getLogger("hta").setLevel(logging.ERROR)
    folder = tmp_path / "ddp"
    folder.mkdir()
    shutil.copy(DDP, folder / DDP.name)
    hta = {}
    for rounding in ("1", "0"):
        monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", rounding)
        df = TraceAnalysis(trace_dir=str(folder)).get_comm_comp_overlap(visualize=False)
        hta[rounding] = float(df["comp_comm_overlap_pctg"][0])
    assert hta == {"1": 14.76, "0": 14.31}
    trace = load_any(DDP)
    kept = hta_window(trace)
    assert 100 * comm_comp_overlap(kept) == pytest.approx(hta["1"], abs=0.005)
    inward = lambda d: d._replace(t0=-(-d.t0 // US) * US, t1=max(-(-d.t0 // US) * US, d.t1 // US * US))  # noqa: E731
    rounded = dataclasses.replace(kept, device_spans=[inward(d) for d in kept.device_spans])
    assert 100 * comm_comp_overlap(rounded) == pytest.approx(hta["0"], abs=0.005)
    # the compute stream's wait for the all-reduce is the device's own, not host code's
    waits = [d for d in analyze(trace).diagnosis if d.cause == Cause.STREAM_WAIT]
    assert waits and waits[0].site_or_phase.startswith("gpu0 stream 40: ncclKernel_AllReduce")
    assert Cause.STREAM_WAIT.who_fixes == DEVICE_SIDE
