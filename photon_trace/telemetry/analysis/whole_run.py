"""The sync gate's pass over the whole run: the syncs' bubbles over the compute extent, which
the gate counts each sync site's idle by (warm-up and drain included), apart from the report's
steady-state window."""

from __future__ import annotations

import time
from typing import NamedTuple

from photon_trace.telemetry.analysis import Report, find_bubbles
from photon_trace.telemetry.analysis.bubble_table import Bubbles
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.report import Made
from photon_trace.telemetry.analysis.shared_splits import shared_splits
from photon_trace.telemetry.analysis.window import compute_extent
from photon_trace.telemetry.trace.records import Trace


class WholeRun(NamedTuple):
    """The sync gate's pass over the whole run, made before the analysis (``_analyse``): then the
    report is not yet held beside it, which at ten million spans was the check's peak of memory."""
    bubbles: Bubbles        # the syncs' bubbles
    seconds: float          # counted in the sync gate's time


def whole_run(trace: Trace) -> WholeRun:
    t0 = time.perf_counter()
    bubbles = find_bubbles(trace, compute_extent(trace), cause=Cause.ACCIDENTAL_SYNC)
    return WholeRun(bubbles, time.perf_counter() - t0)


def whole_run_and_window(trace: Trace, window: tuple[int, int]) -> tuple[WholeRun, Made | None]:
    """``whole_run`` and, where one pass makes both (``shared_splits``), ``analyze``'s splits of
    ``window`` (its ``made``); the pass's time is all counted as the sync gate's."""
    t0 = time.perf_counter()
    both = shared_splits(trace, window)
    if both is None:
        return whole_run(trace), None
    return WholeRun(both.syncs, time.perf_counter() - t0), (both.table, both.bubbles, both.launch)


def whole_run_bubbles(report: Report | None, trace: Trace, made: WholeRun | None) -> Bubbles | list:
    """The syncs' bubbles of the whole run (its compute extent), by which its syncs' idle is
    counted: ``made`` before the analysis where the window is shorter than the run, else the
    report's own. A short profile has no warm-up to cut, so its steady-state window is the whole
    extent and the report's bubbles are these already (made the same way; ``with_cover`` only
    adds what covered them): splitting every gap again took a third of checking a 27k-event
    profile."""
    if report is None:
        return []
    if made is not None:
        return made.bubbles
    return report.bubbles if tuple(report.window) == compute_extent(trace) else whole_run(trace).bubbles
