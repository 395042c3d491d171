"""Each step's batch rows by step number, for the timeline's span sets (``data.py``)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from photon_trace.dashboard.timeline.fields import numbers
from photon_trace.telemetry.trace.records import Trace


def rows_lookup(trace: Trace) -> Callable[[np.ndarray], np.ndarray]:
    """A function from step numbers to each step's batch rows (the ``steps`` records' ``rows``,
    NaN for a step without a record): the info column the timeline's hover shows."""
    if not len(trace.steps):
        return lambda steps: np.zeros(len(steps))
    ids = numbers(trace.steps, "step")
    rows = numbers(trace.steps, "rows").astype(np.float64)
    order = np.argsort(ids, kind="stable")
    ids, rows = ids[order], rows[order]
    if len(ids) and int(ids[-1]) - int(ids[0]) == len(ids) - 1 and (np.diff(ids) == 1).all():
        # steps numbered without a gap, as a run's are: a step's record is at step - first, no search
        first = int(ids[0])

        def direct(steps: np.ndarray) -> np.ndarray:
            i = steps - first
            ok = (i >= 0) & (i < len(ids))
            return np.where(ok, rows[np.where(ok, i, 0)], np.nan)
        return direct

    def lookup(steps: np.ndarray) -> np.ndarray:
        if len(steps) == 0:
            return np.zeros(0)
        i = np.clip(np.searchsorted(ids, steps), 0, len(ids) - 1)
        return np.where(ids[i] == steps, rows[i], np.nan)
    return lookup
