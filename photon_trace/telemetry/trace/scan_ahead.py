"""A large file's chunk lines read as arrays (``row_scan.py``) on two threads, ahead of the loader.

Both scanners run without the GIL (the compiled one, ``row_scan_compiled.py``, in one C call per
row section; numpy's, ``row_scan.scan_chunk``, in array operations over a line of megabytes): on
the two cores here two threads scanned 1.5-1.9x as fast as one with numpy's (30 lines of a
1M-span file: 87-100 MB/s against 54-58), and a 10M-span file loaded in 15.8 s, not 23.2 (its
load's peak RSS 1.79 GB, not 1.9-2.1: see ``row_columns.py`` on copies). The loader
still takes the lines in their order and does everything else with them itself, so what loads,
and every error and where it is raised, is what a scan in the loop gave.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

THREADS = 2
AHEAD = 3      # lines read past the one the loader is at: enough to keep both threads busy


def scanned_ahead(lines: Iterator[tuple[int, bytes, bool]], scan: Callable[[int, bytes], T | None],
                  wanted: Callable[[bytes], bool]) -> Iterator[tuple[int, bytes, bool, T | None]]:
    """``lines`` (line number, line, whether last) in order, each with ``scan(number, line)``
    when ``wanted(line)``, else None. The scans run on worker threads up to ``AHEAD`` lines
    ahead; one that raised raises here, at its line. Closing the iterator (the loader stopped
    early) drops what is pending and stops the threads."""
    pool = ThreadPoolExecutor(THREADS, thread_name_prefix="photon-trace-scan")
    pending: deque[tuple[tuple[int, bytes, bool], Future | None]] = deque()
    try:
        for line in lines:
            pending.append((line, pool.submit(scan, line[0], line[1]) if wanted(line[1]) else None))
            if len(pending) > AHEAD:
                yield _taken(pending.popleft())
        while pending:
            yield _taken(pending.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _taken(entry: tuple[tuple[int, bytes, bool], Future | None]) -> tuple[int, bytes, bool, object]:
    (lineno, raw, last), future = entry
    return lineno, raw, last, future.result() if future is not None else None
