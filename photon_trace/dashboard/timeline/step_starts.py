"""Where each step begins on the timeline: the step markers drawn along it (``draw.py``)."""
from __future__ import annotations

import numpy as np

from photon_trace.telemetry.tracer import Phase


def step_starts(phase, h_step: np.ndarray, h_t0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each step begins: its launch (its first host span when it has no launch), in time order."""
    codes, names = phase
    launch = Phase.LAUNCH.span_name
    m = np.flatnonzero(codes == names.index(launch)) if launch in names else np.arange(len(codes))
    if not len(m):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    o = np.lexsort((h_t0[m], h_step[m]))
    st_sorted, t0_sorted = h_step[m][o], h_t0[m][o]
    first = np.concatenate([[True], st_sorted[1:] != st_sorted[:-1]])
    step_ids, step_t0 = st_sorted[first], t0_sorted[first]
    o = np.argsort(step_t0, kind="stable")
    return step_ids[o], step_t0[o]
