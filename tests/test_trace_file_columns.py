"""A large trace file loads its host and device spans as ``Columns`` (issue 31, item 4): the
same records, header and errors as the list form, ~50 bytes a span instead of ~750.
``COLUMNS_FROM`` (the size from which a file loads so) is set to 0 here so small files take
that path."""
from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from photon_trace.telemetry.trace import file as trace_file
from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.file import TraceFormatError, load_trace, write_trace
from photon_trace.telemetry.trace.file_errors import read_bytes
from photon_trace.telemetry.trace.importers import load_any

from helpers.kineto_builder import training_trace

DATA = Path(__file__).parent / "data"
FILES = sorted((DATA / "golden").glob("*.trace.jsonl*")) + sorted(Path(__file__).parents[1].glob("traces/*.trace.jsonl*"))


def _as_lists(trace):
    return (trace.header, list(trace.host_spans), list(trace.device_spans), trace.waits, trace.steps, trace.requests)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_columns_hold_what_the_lists_hold(path, monkeypatch):
    as_lists = load_trace(path)
    monkeypatch.setattr(trace_file, "COLUMNS_FROM", 0)
    as_columns = load_trace(path)
    assert isinstance(as_columns.host_spans, Columns) and isinstance(as_columns.device_spans, Columns)
    assert _as_lists(as_columns) == _as_lists(as_lists)


def test_a_bad_row_is_named_the_same_way(tmp_path, monkeypatch):
    src = FILES[0]
    lines = read_bytes(src)[0].decode().splitlines()
    i = next(i for i, line in enumerate(lines) if '"host_spans"' in line)
    lines[i] = lines[i].replace('"host_spans":[[', '"host_spans":[["plan",1,0,"x",', 1)
    bad = tmp_path / "bad.trace.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError) as as_lists:
        load_trace(bad)
    monkeypatch.setattr(trace_file, "COLUMNS_FROM", 0)
    with pytest.raises(TraceFormatError) as as_columns:
        load_trace(bad)
    assert str(as_columns.value) == str(as_lists.value) and "host_spans row 0" in str(as_lists.value)


def test_columns_take_a_fraction_of_the_lists_memory(tmp_path, monkeypatch):
    ours = write_trace(load_any(training_trace(150, kernels_per_step=40).write(tmp_path / "t.json.gz")),
                       tmp_path / "t.trace.jsonl.gz")
    peaks = {}
    for name, threshold in (("lists", 1 << 62), ("columns", 0)):
        monkeypatch.setattr(trace_file, "COLUMNS_FROM", threshold)
        tracemalloc.start()
        try:
            trace = load_trace(ours)
            peaks[name] = tracemalloc.get_traced_memory()[0]      # what the loaded trace holds
        finally:
            tracemalloc.stop()
        del trace
    assert peaks["columns"] < peaks["lists"] / 3, peaks
