"""The Nsight importer's columns equal the records its old path made (issue 31: nothing changes
in the answers), on the four real exports and on written ones with ties, unlinked ops, unnamed
kernels and duplicated runtime rows.

The importer reads device ops, runtime calls and OS runtime calls as arrays from SQLite and makes
``Columns`` of them; ``helpers/nsys_records.py`` keeps the path it replaced (a tuple per row, a
record per tuple, lists). Every record, the header's figures, the report and the gate must be
equal between the two.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from helpers.nsys_builder import ExportWriter
from helpers.nsys_records import header_view, import_records
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, run_check
from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.records import Trace

DATA = Path(__file__).parent / "data" / "nsys"
SAMPLES = ["pipit_saxpy0", "pipit_cloverleaf", "fuser_report1", "weatherbench2_report1"]


def assert_same(path: Path, step_annotation: str | None = None) -> Trace:
    ours = load_any(path, step_annotation=step_annotation)
    old = import_records(path, step_annotation=step_annotation)
    assert isinstance(ours.device_spans, Columns) and isinstance(ours.host_spans, Columns)
    assert list(ours.device_spans) == old.device_spans
    assert list(ours.host_spans) == old.host_spans
    assert (ours.waits, ours.steps) == (old.waits, old.steps)
    view = header_view(ours.header)
    assert view == old.header
    for side in ("host", "device"):         # the legend's order too: names in order of first use
        assert list(view["categories"][side]) == list(old.header["categories"][side])
    # The analysis and the gate of the same records as lists (the header is the importer's in both).
    as_lists = Trace(ours.header, old.host_spans, old.device_spans, old.waits, old.steps, old.requests)
    assert analyze(ours) == analyze(as_lists)
    mine, theirs = run_check(ours), run_check(as_lists)
    assert mine.exit_code == theirs.exit_code
    assert [g._replace(seconds=0) for g in mine.gates] == \
        [g._replace(seconds=0) for g in theirs.gates]
    return ours


@pytest.mark.parametrize("name", SAMPLES)
def test_the_real_exports_give_the_records_of_the_record_path(name):
    assert_same(DATA / f"{name}.sqlite.gz")


def _written(path: Path, duplicate: bool) -> Path:
    """Two streams, ops and calls tied in time, a kernel no call launched, a kernel without a
    name, a pageable copy and a sync per step; ``duplicate``: one call recorded twice."""
    w = ExportWriter(path)
    names = [w.string(f"kernel_{i}") for i in range(3)] + [None]
    launch, copy, sync, step = (w.string("cudaLaunchKernel_v7000"), w.string("cudaMemcpyAsync_v3020"),
                                w.string("cudaStreamSynchronize_v3020"), w.string("step"))
    kernels, calls, copies, ranges, corr, t = [], [], [], [], 0, 1_000
    for s in range(6):
        ranges.append((t, t + 9_000, step, None))
        for k in range(4):
            corr += 1
            calls.append((t + 100 * k, t + 100 * k + 50, corr, launch))
            calls.append((t + 100 * k, t + 100 * k + 50, 10_000 + corr, sync))     # tied with the launch
            kernels.append((t + 1_000 + 300 * k, t + 1_200 + 300 * k, 7 + k % 2, corr, names[k]))
        kernels.append((t + 1_000, t + 1_200, 9, 99_999, names[0]))                # tied, launched by no call
        corr += 1
        calls.append((t + 2_500, t + 4_000, corr, copy))
        copies.append((t + 3_000, t + 3_500, 8, corr, 4096, 1, 0, 2))
        t += 10_000
    if duplicate:
        calls.append(calls[0])
    w.add_kernels(kernels)
    w.add_memcpys(copies)
    w.add_calls(calls)
    w.add_ranges(ranges)
    return w.close()


@pytest.mark.parametrize("duplicate", [False, True])
def test_written_exports_with_ties_and_gaps_give_the_same_records(tmp_path, duplicate):
    trace = assert_same(_written(tmp_path / "ties.sqlite", duplicate), step_annotation="step")
    assert trace.header["source"]["duplicate_runtime_rows"] == (1 if duplicate else 0)
    assert trace.header["source"]["unlinked"] == 6
    assert "kernel None" in trace.device_spans.tables["op"]


def test_a_time_that_is_no_integer_is_bad_input(tmp_path):
    path = _written(tmp_path / "bad.sqlite", False)
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 'soon' WHERE rowid = 3")
    con.commit()
    con.close()
    result = run_check(path)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "not integers" in result.error and "bad.sqlite" in result.error
