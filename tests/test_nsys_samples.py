"""The four real Nsight Systems exports (tests/data/nsys, NOTICE.md there), imported, analysed and
gated, each figure against SQL run straight on the export (``helpers/nsys_sql.py``).

The exports span nsys 2022.2 to 2025.5: the old metadata table, no ENUM tables and runtime
calls recorded twice (saxpy); a sync after every kernel (CloverLeaf); two processes whose
correlation ids repeat, 13.5k NVTX ranges and pageable async copies (nvFuser); a report with
one memset and no kernel or memcpy table (WeatherBench2).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers import nsys_sql as sql
from photon_trace.telemetry.analysis import analyze, device_idle, expert_rules, gpu_gaps, gpu_time_util
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, EXIT_FAIL, run_check
from photon_trace.telemetry.trace.importers import load_any

DATA = Path(__file__).parent / "data" / "nsys"
SAMPLES = ["pipit_saxpy0", "pipit_cloverleaf", "fuser_report1", "weatherbench2_report1"]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nsys")
    out = {}
    for name in SAMPLES:
        gz = DATA / f"{name}.sqlite.gz"
        out[name] = (load_any(gz), sql.open_sample(gz, tmp))
    return out


@pytest.mark.parametrize("name", SAMPLES)
def test_idle_per_stream_and_per_device_equal_sql_to_the_nanosecond(loaded, name):
    trace, con = loaded[name]
    report = analyze(trace)
    per_stream = sql.idle_by(con, "pid, deviceId, streamId")
    assert {s.stream: (s.span_ns, s.idle_ns) for s in report.streams} == \
        {f"gpu{d} stream {st}": v for (_, d, st), v in per_stream.items()}
    per_device = sql.idle_by(con, "pid, deviceId")
    # No export here holds the profiler stalls nsys counts as busy, so the device view is the ops' union.
    assert not trace.header["profiler_overhead"]
    assert {d.device: (d.span_ns, d.idle_ns) for d in device_idle(trace)} == \
        {f"gpu{d}": v for (_, d), v in per_device.items()}
    assert [(d.span_ns, d.idle_ns) for d in report.devices] == list(per_device.values())


@pytest.mark.parametrize("name", SAMPLES)
def test_host_waits_count_and_last_as_sql_finds_them(loaded, name):
    trace, con = loaded[name]
    count, total = sql.sync_calls(con)
    assert (len(trace.waits), sum(w.t1 - w.t0 for w in trace.waits)) == (count, total)
    assert not any(w.expected for w in trace.waits)
    pageable = [w for w in trace.waits if "pageable host memory" in w.reason]
    n, size = sql.pageable_copies(con)
    assert len(pageable) == n
    assert sum(int(w.reason.split("(")[-1].split(" B)")[0]) for w in pageable) == size


def test_the_samples_hold_what_their_notice_says(loaded):
    saxpy, fuser, clover = (loaded[n][0] for n in ("pipit_saxpy0", "fuser_report1", "pipit_cloverleaf"))
    assert (len(saxpy.waits), saxpy.header["source"]["duplicate_runtime_rows"]) == (15, 38)
    assert clover.header["nsys_rules"]["cuda_api_sync"]["count"] == 1312
    assert fuser.header["nsys_rules"]["cuda_memcpy_async"]["count"] == 2
    assert len(gpu_gaps(fuser)) == 3
    # correlation ids repeat across fuser's two processes: every op is paired within its own
    assert fuser.header["source"]["unlinked"] == 0 and all(d.enqueued <= d.t0 for d in fuser.device_spans)
    assert saxpy.header["source"]["metadata_table"] == "EXPORT_META_DATA"


@pytest.mark.parametrize("name", SAMPLES)
def test_nvtx_ranges_per_domain_equal_sql(loaded, name):
    trace, con = loaded[name]
    per_domain = sql.nvtx_per_domain(con)
    assert trace.header["source"]["nvtx_ranges"] == per_domain
    nvtx = [h for h in trace.host_spans if trace.header["categories"]["host"].get(h.phase) == "nvtx"]
    assert len(nvtx) == sum(per_domain.values())


def test_saxpy_names_its_mpi_ranges_through_text_ids():
    trace = load_any(DATA / "pipit_saxpy0.sqlite.gz")
    names = {h.phase for h in trace.host_spans}
    assert {"MPI_Send", "MPI_Recv", "MPI_Init", "saxpy"} <= names
    assert trace.header["source"]["nvtx_ranges"] == {"": 5, "MPI": 17}


@pytest.mark.parametrize("name", SAMPLES)
def test_gpu_rules_follow_nsys_definitions(loaded, name):
    trace, con = loaded[name]
    assert [(g.duration_ns, g.t0) for g in gpu_gaps(trace)] == sql.gpu_gaps(con)
    assert [(c.in_use, c.duration_ns, c.t0) for c in gpu_time_util(trace)] == \
        [(pct, dur, t0) for pct, dur, t0 in sql.gpu_time_util(con)]


@pytest.mark.parametrize("name", SAMPLES)
def test_api_rules_follow_nsys_definitions(loaded, name):
    trace, con = loaded[name]
    rules = {r.name: r for r in expert_rules(trace)}
    assert (rules["cuda_api_sync"].count, rules["cuda_api_sync"].total_ns) == tuple(sql.api_sync(con))
    if "cuda_memcpy_sync" in rules:
        assert (rules["cuda_memcpy_sync"].count, rules["cuda_memcpy_sync"].total_ns) == tuple(sql.memcpy_sync(con))
        n, _ = sql.pageable_copies(con)
        assert rules["cuda_memcpy_async"].count == n
    for r in rules.values():     # longest first, at most nsys's 50 rows
        durations = [row[r.columns.index("Duration")] for row in r.rows]
        assert durations == sorted(durations, reverse=True) and len(r.rows) <= 50


@pytest.mark.parametrize("name,code", [("pipit_saxpy0", EXIT_FAIL), ("pipit_cloverleaf", EXIT_FAIL),
                                       ("fuser_report1", EXIT_FAIL), ("weatherbench2_report1", EXIT_BAD_INPUT)])
def test_the_gate_on_each_sample(loaded, name, code):
    trace, con = loaded[name]
    result = run_check(DATA / f"{name}.sqlite.gz")
    assert result.exit_code == code, result.summary()
    if code == EXIT_BAD_INPUT:     # one memset: no gap to measure, and the gate says so
        assert "one device op" in result.error
        return
    syncs = next(g for g in result.gates if g.name == "accidental_syncs")
    assert syncs.value == sql.sync_calls(con)[0]
    idle = next(g for g in result.gates if g.name == "idle_fraction")
    ((span, gap),) = sql.idle_by(con, "pid, deviceId, streamId").values()
    assert idle.value == pytest.approx(gap / span, abs=1e-12)
