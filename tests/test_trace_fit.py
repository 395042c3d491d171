"""A trace that cannot fit in memory is refused up front (issue 31, item 6): its estimated need
against the memory available, exit 2 from import and check, the dashboard says so, and
``PHOTON_TRACE_MEMORY_BUDGET=off`` loads it anyway. The "available" figure is injected with
that variable (never by allocating memory)."""
from __future__ import annotations

import gzip
import json

import pytest

from photon_trace.cli import main as cli
from photon_trace.dashboard.sources.store import LoadError, TraceStore
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, run_check
from photon_trace.telemetry.trace import fit
from photon_trace.telemetry.trace.file import load_trace, write_trace
from photon_trace.telemetry.trace.fit import BUDGET_ENV, TraceTooLargeError, available, estimate
from photon_trace.telemetry.trace.importers import load_any

from helpers.kineto_builder import training_trace


@pytest.fixture(scope="module")
def kineto(tmp_path_factory):
    return training_trace(60, kernels_per_step=40).write(tmp_path_factory.mktemp("fit") / "train.pt.trace.json.gz")


def _events(path) -> int:
    return len(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"])


def test_the_estimate_counts_the_events_from_the_first_mb(kineto):
    est = estimate(kineto, "kineto")
    true = _events(kineto)
    assert abs(est.records - true) <= 0.1 * true, (est, true)
    assert est.bytes == fit.BASE_BYTES + est.records * fit.BYTES_PER_EVENT
    assert f"~{est.records:,} events" in est.how


def test_a_trace_over_the_budget_is_refused_with_both_figures_and_exit_2(kineto, monkeypatch, capsys):
    need = estimate(kineto, "kineto").bytes
    monkeypatch.setenv(BUDGET_ENV, str(need // 2))
    with pytest.raises(TraceTooLargeError, match=r"too large for the memory available: loading it needs ~[\d.]+ MB "
                                                 r"\(~[\d,]+ events .*PHOTON_TRACE_MEMORY_BUDGET=off"):
        load_any(kineto)
    assert cli(["import", str(kineto)]) == 2
    err = capsys.readouterr().err
    assert "too large for the memory available" in err and "Traceback" not in err
    result = run_check(kineto)
    assert result.exit_code == EXIT_BAD_INPUT and "too large" in result.error
    assert cli(["check", str(kineto)]) == 2
    with pytest.raises(LoadError, match="too large for the memory available"):
        TraceStore([kineto.parent]).get(kineto)


def test_under_the_budget_or_with_the_override_it_loads(kineto, monkeypatch):
    need = estimate(kineto, "kineto").bytes
    monkeypatch.setenv(BUDGET_ENV, str(need * 2))
    assert len(load_any(kineto).device_spans) > 0
    monkeypatch.setenv(BUDGET_ENV, "1K")
    with pytest.raises(TraceTooLargeError):
        load_any(kineto)
    monkeypatch.setenv(BUDGET_ENV, "off")
    assert len(load_any(kineto).device_spans) > 0


def test_our_own_files_are_estimated_and_refused_too(kineto, tmp_path, monkeypatch):
    ours = write_trace(load_any(kineto), tmp_path / "ours.trace.jsonl.gz")
    trace = load_trace(ours)
    rows = sum(len(getattr(trace, k)) for k in ("host_spans", "device_spans", "waits", "steps"))
    est = estimate(ours, "ours")
    assert abs(est.records - rows) <= 0.1 * rows, (est, rows)
    monkeypatch.setenv(BUDGET_ENV, str(est.bytes - 1))
    with pytest.raises(TraceTooLargeError, match="too large"):
        load_trace(ours)
    assert cli(["check", str(ours)]) == 2


def test_a_file_that_loads_as_columns_is_estimated_at_the_columns_cost(kineto, tmp_path, monkeypatch):
    """A file past ``COLUMNS_FROM`` loads its records as columns (~200 B each through ``check``,
    not ~750 as lists): the estimate says so, and a budget between the two figures loads it."""
    from photon_trace.telemetry.trace import file as trace_file

    ours = write_trace(load_any(kineto), tmp_path / "ours.trace.jsonl.gz")
    as_lists, as_columns = estimate(ours, "ours"), estimate(ours, "ours", columns_from=0)
    assert as_columns.records == as_lists.records
    assert as_columns.bytes == fit.BASE_BYTES + as_columns.records * fit.BYTES_PER_COLUMN_ROW < as_lists.bytes
    assert estimate(ours, "ours", columns_from=1 << 40) == as_lists      # under the threshold: lists
    monkeypatch.setattr(trace_file, "COLUMNS_FROM", 0)
    monkeypatch.setenv(BUDGET_ENV, str(as_columns.bytes))
    assert len(load_trace(ours).device_spans) > 0
    monkeypatch.setenv(BUDGET_ENV, str(as_columns.bytes - 1))
    with pytest.raises(TraceTooLargeError, match=f"x ~{fit.BYTES_PER_COLUMN_ROW} B each"):
        load_trace(ours)


def test_available_reads_the_machine_or_the_budget(monkeypatch):
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    have, where = available()
    assert have is not None and have > 0 and ("MemAvailable" in where or "cgroup" in where)
    monkeypatch.setenv(BUDGET_ENV, "2G")
    assert available() == (2 << 30, f"{BUDGET_ENV}=2G")
    monkeypatch.setenv(BUDGET_ENV, "lots")
    with pytest.raises(Exception, match="give bytes"):
        available()


def test_a_cgroup_limit_counts_less_its_usage_but_not_its_reclaimable_cache(tmp_path):
    """A container's limit, faked as the files the kernel shows (cgroup v2, then v1)."""
    (tmp_path / "memory.max").write_text("4294967296\n")
    (tmp_path / "memory.current").write_text(str(3 << 30) + "\n")
    (tmp_path / "memory.stat").write_text(f"anon 1000\ninactive_file {512 << 20}\nactive_file 7\n")
    assert fit._cgroup_left(tmp_path) == (1 << 30) + (512 << 20)
    (tmp_path / "memory.max").write_text("max\n")
    assert fit._cgroup_left(tmp_path) is None
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text(str(2 << 30))
    (v1 / "memory" / "memory.usage_in_bytes").write_text(str(1 << 30))
    (v1 / "memory" / "memory.stat").write_text(f"total_inactive_file {1 << 20}\n")
    assert fit._cgroup_left(v1) == (1 << 30) + (1 << 20)
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712")   # v1's "no limit"
    assert fit._cgroup_left(v1) is None


def test_an_address_space_limit_is_what_a_load_has(kineto, monkeypatch):
    """``ulimit -v`` (a CI runner's cap): allocations past it fail however much memory the machine
    has, so the figure a load may use is the limit less the process's size, and a trace that
    needs more is refused with it named, not left to die of a MemoryError half-way."""
    import resource

    monkeypatch.delenv(BUDGET_ENV, raising=False)
    need = estimate(kineto, "kineto").bytes
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    limit = size + need // 2
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limit, resource.RLIM_INFINITY)
                        if which == resource.RLIMIT_AS else (resource.RLIM_INFINITY,) * 2)
    have, where = available()
    assert have <= need // 2 and "address-space limit" in where
    with pytest.raises(TraceTooLargeError, match="address-space limit"):
        load_any(kineto)
