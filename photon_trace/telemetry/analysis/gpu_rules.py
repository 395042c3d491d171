"""Nsight Systems' expert rules (``nsys analyze``), under nsys's names and with its defaults.

The two GPU rules need only a trace's device ops, so they run on any trace (ours, a PyTorch
profiler trace, an Nsight export), per device as ``device_idle`` groups them, over the whole
trace, with the profiler's counted stalls as busy time:

* ``gpu_gaps``: each stretch longer than ``gap_ms`` (500 ms) in which the device ran
  nothing, between its first op's start and its last op's end (the edges are not gaps);
  longest first.
* ``gpu_time_util``: the device's span cut into ``chunks`` (30) equal chunks (their length
  rounded up to a whole ns, so the last may be shorter); each chunk's in-use percentage is
  the time its ops ran inside it over its length (ops running together add up: it can pass
  100%); chunks under ``threshold`` (50%) are kept, consecutive ones merged into one row with
  their length-weighted mean, rounded to 0.1%; lowest first.

The four API rules (``cuda_api_sync``, ``cuda_memcpy_sync``, ``cuda_memset_sync``,
``cuda_memcpy_async``) need the calls' names and the copies' memory kinds: an Nsight import
computes them in SQL (``telemetry/trace/importers/nsys_rules.py``) into
``header["nsys_rules"]``; ``expert_rules`` gathers all six in nsys's order.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.device_idle import busy_runs, device_ops, with_overhead
from photon_trace.telemetry.trace.records import Trace

GAP_MS = 500
UTIL_THRESHOLD = 50
UTIL_CHUNKS = 30
ROW_LIMIT = 50
API_RULES = ("cuda_memcpy_async", "cuda_memcpy_sync", "cuda_memset_sync", "cuda_api_sync")
"""nsys analyze's default rules before the GPU ones, in its order."""


class GpuGap(NamedTuple):
    device: str
    t0: int
    duration_ns: int


class UtilChunk(NamedTuple):
    device: str
    t0: int
    duration_ns: int
    in_use: float          # percent of the rows' time ops ran (length-weighted over merged chunks)


class RuleResult(NamedTuple):
    name: str              # nsys's rule name
    title: str
    count: int             # rows found
    total_ns: int          # their durations summed
    columns: list[str]
    rows: list[list]       # the first ROW_LIMIT, in nsys's order


def gpu_gaps(trace: Trace, gap_ms: int = GAP_MS) -> list[GpuGap]:
    """Every gap over ``gap_ms`` on every device, longest first (then by start)."""
    out = []
    limit = gap_ms * 1_000_000
    for dev, (t0, t1, _) in device_ops(trace).items():
        s, e = busy_runs(*with_overhead(trace, dev, t0, t1))
        length = s[1:] - e[:-1]
        for i in np.flatnonzero(length > limit):
            out.append(GpuGap(dev, int(e[i]), int(length[i])))
    return sorted(out, key=lambda g: (-g.duration_ns, g.t0))


def _in_use(t0: np.ndarray, t1: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Op time before each of ``x``: the sum over ops of ``max(0, min(x, end) - start)``."""
    s, e = np.sort(t0), np.sort(t1)
    cs, ce = np.concatenate([[0], np.cumsum(s)]), np.concatenate([[0], np.cumsum(e)])
    i, j = np.searchsorted(s, x, side="left"), np.searchsorted(e, x, side="left")
    return (i * x - cs[i]) - (j * x - ce[j])


def gpu_time_util(trace: Trace, threshold: int = UTIL_THRESHOLD, chunks: int = UTIL_CHUNKS) -> list[UtilChunk]:
    """The low-utilisation stretches of every device (see the module docstring), lowest first."""
    if not 1 <= chunks <= 1000:
        raise ValueError(f"chunks must be between 1 and 1000, got {chunks}")
    out = []
    for dev, (t0, t1, _) in device_ops(trace).items():
        a, b = with_overhead(trace, dev, t0, t1)
        start, end = int(a.min()), int(b.max())
        size = math.ceil((end - start) / chunks)
        cs = start + size * np.arange(chunks, dtype=np.int64)
        ce = np.minimum(cs + size, end)
        ok = cs < ce
        cs, ce = cs[ok], ce[ok]
        pct = (_in_use(a, b, ce) - _in_use(a, b, cs)) / (ce - cs) * 100
        low = np.flatnonzero(pct < threshold)
        if not len(low):
            continue
        groups = np.split(low, np.flatnonzero(np.diff(low) != 1) + 1)
        for g in groups:
            sizes = (ce[g] - cs[g]).astype(np.float64)
            mean = round(float(np.sum(sizes * pct[g]) / np.sum(sizes)), 1)
            out.append(UtilChunk(dev, int(cs[g[0]]), int(ce[g[-1]] - cs[g[0]]), mean))
    return sorted(out, key=lambda c: (c.in_use, c.duration_ns))


def expert_rules(trace: Trace, *, gap_ms: int = GAP_MS, threshold: int = UTIL_THRESHOLD,
                 chunks: int = UTIL_CHUNKS) -> list[RuleResult]:
    """nsys analyze's six default rules on ``trace``: the API rules an Nsight import computed
    (absent from other traces), then ``gpu_gaps`` and ``gpu_time_util``."""
    out = []
    api = trace.header.get("nsys_rules") or {}
    for name in API_RULES:
        r = api.get(name)
        if r is not None:
            out.append(RuleResult(name, r["title"], r["count"], r["total_ns"], list(r["columns"]),
                                  [list(x) for x in r["rows"]]))
    if trace.device_spans:
        gaps = gpu_gaps(trace, gap_ms)
        out.append(RuleResult("gpu_gaps", "GPU Gaps", len(gaps), sum(g.duration_ns for g in gaps),
                              ["Duration", "Start", "Device"],
                              [[g.duration_ns, g.t0, g.device] for g in gaps[:ROW_LIMIT]]))
        util = gpu_time_util(trace, threshold, chunks)
        out.append(RuleResult("gpu_time_util", "GPU Time Utilization", len(util), sum(c.duration_ns for c in util),
                              ["In-Use (%)", "Duration", "Start", "Device"],
                              [[c.in_use, c.duration_ns, c.t0, c.device] for c in util[:ROW_LIMIT]]))
    return out


__all__ = ["GpuGap", "UtilChunk", "RuleResult", "gpu_gaps", "gpu_time_util", "expert_rules",
           "GAP_MS", "UTIL_THRESHOLD", "UTIL_CHUNKS"]
