"""Run-level quantities of the cost model: L, zombie rows and the zombie tax z.

These are taken over the whole trace, not the steady-state window: a request's
length and its final zombie step straddle the window's edges (an equal-length
batch's only zombie step *is* the drain), and the cost model compares them with
end-to-end throughput.

**z, the zombie tax**, is the share of row-steps that were zombies: zombie
rows over all rows of all steps. A zombie holds its row for one step after its
request finished; whoever would have used that row (the stream's next request,
a queued request waiting for the row and its KV pages) starts a step later, so
the run needs about one extra row-step per request: z = 1/(L+1) on one stream,
and about the same per stream in a batch, whether the step's cost is flat in
the rows (bandwidth-bound: the zombie itself is nearly free, the displacement
is not) or grows with them. On modelled runs (``testing.simulate``: 1 to 8
streams, 1 to 4 requests each, equal and ragged lengths, 0.8 to 2.2 ms steps)
the cost model's prediction with this z lands within 1 point of the observed
speedup.

``z_steps``, the share of step time spent on steps whose rows were *all*
zombies, is the other reading ("one wasted step per L tokens on a single
stream, nearly free in a batch"): equal to z on one stream, but it misses the
displacement in a batch of closed-loop streams (4 points off on short ragged
requests), so it is kept as a diagnostic only.
"""
from __future__ import annotations

import numpy as np

from photon_trace.telemetry.analysis.steps import step_periods
from photon_trace.telemetry.analysis.window import _primary
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.tracer import Phase


def mean_generated_tokens(trace: Trace) -> float:
    """L: mean ``tokens`` of the "finalized" request events (their output length).

    If the events carry no counts, the run's committed tokens over the number of
    finalized requests.
    """
    done = [r for r in trace.requests if r.event == "finalized"]
    if not done:
        return 0.0
    if any(r.tokens for r in done):
        return sum(r.tokens for r in done) / len(done)
    return sum(s.tokens for s in trace.steps) / len(done)


def zombie_rows(trace: Trace) -> int:
    return sum(s.zombie_rows for s in trace.steps)


def wasted_step_share(trace: Trace) -> float:
    """z_steps: the share of step time spent on all-zombie steps (see the module docstring)."""
    records = {r.step: r for r in trace.steps}
    total = wasted = 0
    for step, _, period in step_periods(trace):
        total += period
        r = records.get(step)
        if r is not None and r.rows > 0 and r.zombie_rows >= r.rows:
            wasted += period
    return wasted / total if total else 0.0


def zombie_tax(trace: Trace) -> float:
    """z: zombie rows over all row-steps (see the module docstring)."""
    rows = sum(s.rows for s in trace.steps)
    return zombie_rows(trace) / rows if rows else 0.0


def run_extent(trace: Trace) -> tuple[int, int]:
    """First compute op to the last commit's end (the last device op's end without host spans)."""
    t0, t1 = _primary(trace, "t0", "t1")
    if not len(t0):
        return (0, 0)
    phase, table = codes(trace.host_spans, "phase")
    commit = Phase.COMMIT.span_name
    ends = column(trace.host_spans, "t1")[np.asarray(phase) == table.index(commit)] if commit in table else []
    last = int(ends.max()) if len(ends) else int(column(trace.device_spans, "t1").max())
    return (int(t0.min()), max(last, int(t1.max())))
