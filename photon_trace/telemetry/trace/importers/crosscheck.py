"""Our trace of a run against ``torch.profiler``'s trace of the same run.

Both record the host's phases on the host clock (ours: monotonic ns; the profiler's: its
own), so the per-step offset between our ``launch`` span and the profiler's ``launch#N``
range puts the two on one clock. Then the steps must be the same, and on a GPU the
device ops must line up: our op times come from CUDA events placed on the host clock
through an anchor, the profiler's from CUPTI, so the residual between the two is an
independent check of that anchor.
"""
from __future__ import annotations

from statistics import median
from typing import NamedTuple

from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.tracer import Phase

_LAUNCH = Phase.LAUNCH.span_name


class ProfilerCheck(NamedTuple):
    steps: int                 # steps launched in our trace
    profiler_steps: int        # launch#N ranges in the profiler's
    same_steps: bool
    host_spread_ns: int        # max - min per-step clock offset (the two host clocks and range jitter)
    device_steps: int          # steps with device ops in both (0 without a GPU)
    device_residual_ns: int    # median |profiler's first op start - ours| per step, on one clock
    device_residual_max_ns: int


def _first_by_step(spans, pick) -> dict[int, int]:
    out: dict[int, int] = {}
    for s in spans:
        if pick(s) and (s.step not in out or s.t0 < out[s.step]):
            out[s.step] = s.t0
    return out


def check_against_profiler(ours: Trace, profiler: Trace) -> ProfilerCheck:
    """Compare ``ours`` with ``profiler`` (imported with ``step_annotation="launch"``)."""
    launches = _first_by_step(ours.host_spans, lambda h: h.phase == _LAUNCH)
    ranges = _first_by_step(profiler.host_spans, lambda h: h.phase.startswith(f"{_LAUNCH}#"))
    common = sorted(set(launches) & set(ranges))
    offsets = [ranges[s] - launches[s] for s in common]
    offset = int(median(offsets)) if offsets else 0
    primary = profiler.header.get("primary_stream")
    theirs = _first_by_step(profiler.device_spans, lambda d: d.stream == primary)
    mine = _first_by_step(ours.device_spans, lambda d: d.stream == "compute")
    residuals = sorted(abs(theirs[s] - offset - mine[s]) for s in set(theirs) & set(mine))
    return ProfilerCheck(
        steps=len(launches), profiler_steps=len(ranges), same_steps=set(launches) == set(ranges),
        host_spread_ns=max(offsets) - min(offsets) if offsets else 0,
        device_steps=len(residuals), device_residual_ns=int(median(residuals)) if residuals else 0,
        device_residual_max_ns=residuals[-1] if residuals else 0)
