"""``Columns``: records as one array per field read back exactly as the records they hold."""
import numpy as np
import pytest

from photon_trace.telemetry.trace.columns import Columns, column, encode
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait


def _spans(n):
    return [HostSpan("plan" if i % 3 else "commit", i, i % 2, 10 * i, 10 * i + 7, f"t{i % 5}", i, -1)
            for i in range(n)]


def test_columns_are_the_records_they_hold():
    rs = _spans(70_000)                      # more than one iteration block
    c = Columns.from_records(HostSpan, rs)
    assert len(c) == len(rs) and list(c) == rs and c == rs
    assert c[0] == rs[0] and c[-1] == rs[-1] and c[123] == rs[123]
    assert list(c[100:140]) == rs[100:140] and isinstance(c[100:140], Columns)
    with pytest.raises(IndexError):
        c[len(rs)]
    assert c != rs[:-1]
    assert c.nbytes() < 60 * len(rs)        # ~7 int64 and 2 int32 fields, not ~200-byte tuples


def test_flags_text_and_empty():
    w = [HostWait("commit: copy-back", True, 1, 2, "engine.py:10", 0, 5, 6),
         HostWait("mask upload", False, 3, 4, "x.py:2", 1)]
    c = Columns.from_records(HostWait, w)
    assert c.arrays["expected"].dtype == bool and c == w and c[1].expected is False
    assert Columns.from_records(DeviceSpan, []) == [] and len(Columns.from_records(DeviceSpan, [])) == 0


def test_column_reads_lists_and_columns_alike():
    rs = _spans(10)
    c = Columns.from_records(HostSpan, rs)
    for name in HostSpan._fields:
        assert list(column(rs, name)) == list(column(c, name)) == [getattr(r, name) for r in rs]
    assert column(c, "t0") is c.arrays["t0"]      # numbers are not copied
    assert column([], "t0").size == 0


def test_take_and_encode():
    rs = _spans(20)
    c = Columns.from_records(HostSpan, rs)
    mask = column(c, "slot") == 1
    assert list(c.take(mask)) == [r for r in rs if r.slot == 1]
    codes, table = encode(["b", "a", "b"])
    assert table == ["b", "a"] and codes.tolist() == [0, 1, 0] and codes.dtype == np.int32


def test_mismatched_columns_are_refused():
    with pytest.raises(ValueError, match="one array of one length"):
        Columns(HostSpan, {"t0": np.zeros(2)}, {})


def test_fields_with_defaults_may_be_left_out():
    c = Columns(HostSpan, {f: np.arange(3) for f in ("step", "slot", "t0", "t1")}
                | {"phase": np.zeros(3, np.int32), "thread": np.zeros(3, np.int32)},
                {"phase": ["plan"], "thread": ["main"]})
    assert c[2] == HostSpan("plan", 2, 2, 2, 2, "main")     # cpu_ns, runq_ns: their default -1
