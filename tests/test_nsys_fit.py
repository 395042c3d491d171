"""An Nsight Systems export that cannot fit in memory is refused before its rows are read (issue
31 item 6), as profiler traces and our own files are: the estimate (the activity tables' rows,
and a ``.sqlite.gz``'s database held in memory) against what is available, exit 2 from import
and check, the override loads it anyway.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from photon_trace.cli import main as cli
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, run_check
from photon_trace.telemetry.trace.fit import BASE_BYTES, BUDGET_ENV, TraceTooLargeError
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.importers.nsys_read import BYTES_PER_ROW

SAMPLE = Path(__file__).parent / "data" / "nsys" / "fuser_report1.sqlite.gz"
ROWS = 18 + 3 + 3 + 990 + 13_513     # its kernels, memcpys, memsets, runtime calls, NVTX events (NOTICE.md)


def test_an_export_over_the_budget_is_refused_and_one_under_it_loads(monkeypatch, capsys):
    monkeypatch.setenv(BUDGET_ENV, str(BASE_BYTES + ROWS * BYTES_PER_ROW))   # the rows fit, the database not
    with pytest.raises(TraceTooLargeError, match=rf"too large for the memory available: importing it needs "
                                                 rf"~[\d.]+ MB \({ROWS:,} activity rows x ~{BYTES_PER_ROW} B each, "
                                                 rf"and the [\d.]+ MB database held in memory\).*{BUDGET_ENV}=off"):
        load_any(SAMPLE)
    assert cli(["import", str(SAMPLE)]) == 2
    err = capsys.readouterr().err
    assert "too large for the memory available" in err and "Traceback" not in err
    result = run_check(SAMPLE)
    assert result.exit_code == EXIT_BAD_INPUT and "too large" in result.error
    # Room for the database too, or the override: it loads.
    monkeypatch.setenv(BUDGET_ENV, str(BASE_BYTES + ROWS * BYTES_PER_ROW + (8 << 20)))
    trace = load_any(SAMPLE)
    assert sum(trace.header["source"]["table_rows"].values()) == ROWS
    monkeypatch.setenv(BUDGET_ENV, "off")
    assert len(load_any(SAMPLE).device_spans) == 24
