"""The loader's scans run ahead on threads (``telemetry/trace/scan_ahead.py``): lines come back
in their order with their own scan, a scan that raised raises at its line, and a loader that
stops early leaves no thread behind."""
from __future__ import annotations

import threading

import pytest

from photon_trace.telemetry.trace.scan_ahead import AHEAD, scanned_ahead


def _lines(n: int):
    return ((i, f"line {i}".encode() * (i % 3), i == n - 1) for i in range(n))


def _scan_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("photon-trace-scan")]


def test_lines_come_back_in_order_each_with_its_own_scan_and_unwanted_ones_unscanned():
    scanned_on = set()

    def scan(n, raw):
        scanned_on.add(threading.current_thread().name)
        return (n, len(raw))

    got = list(scanned_ahead(_lines(50), scan, lambda raw: len(raw) > 0))
    assert [g[0] for g in got] == list(range(50)) and [g[2] for g in got] == [False] * 49 + [True]
    for n, raw, _, result in got:
        assert result == ((n, len(raw)) if raw else None)
    assert scanned_on and all(name.startswith("photon-trace-scan") for name in scanned_on)
    assert not _scan_threads()


def test_a_scan_that_raised_raises_at_its_line_after_the_lines_before_it():
    def scan(n, raw):
        if n == 7:
            raise ValueError("bad line 7")
        return n

    taken = []
    with pytest.raises(ValueError, match="bad line 7"):
        for n, _, _, result in scanned_ahead(_lines(30), scan, lambda raw: True):
            taken.append(result)
    assert taken == list(range(7))
    assert not _scan_threads()


def test_a_loader_that_stops_early_leaves_no_thread_and_reads_only_a_few_lines_ahead():
    read = []

    def source():
        for item in _lines(1000):
            read.append(item[0])
            yield item

    it = scanned_ahead(source(), lambda n, raw: n, lambda raw: True)
    assert next(it)[3] == 0
    it.close()
    assert len(read) == AHEAD + 1 and not _scan_threads()
