"""Traces for the dashboard tests, from ``helpers.loop_sim``.

Three runs of one workload (blocking, pipelined, and pipelined with the
``mask_upload=sync`` bug), a long one (10,000 steps) and a corrupt file.
The dashboard test modules import it as ``helpers.dashboard_samples`` (pytest puts
``tests/`` on ``sys.path``).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.trace.records import Trace
from helpers.loop_sim import SyntheticRun, synthetic_trace
from photon_trace.telemetry.trace.file import write_trace
from photon_trace.telemetry.tracer import TraceLevel

WORKLOAD = dict(steps=80, requests=30)
LONG_STEPS = 10_000
CORRUPT = '{"format":"photon_trace","version":1}\n{"chunk":1,"host_spans":[[1,2]]}\n{"end":{}}\n'


@lru_cache(maxsize=None)
def sample(kind: str) -> Trace:
    """``blocking`` | ``pipelined`` | ``mask_sync`` | ``long`` (do not mutate: shared)."""
    if kind == "blocking":
        return synthetic_trace(SyntheticRun(depth=1, **WORKLOAD))
    if kind == "pipelined":
        return synthetic_trace(SyntheticRun(depth=2, **WORKLOAD))
    if kind == "mask_sync":
        return synthetic_trace(SyntheticRun(depth=2, mask_upload_bug=True, **WORKLOAD))
    if kind == "long":
        # Pipelined with the mask-upload bug, at ON level: ~10 spans a step.
        return synthetic_trace(SyntheticRun(steps=LONG_STEPS, requests=3 * LONG_STEPS, depth=2,
                                            mask_upload_bug=True, level=TraceLevel.ON))
    raise ValueError(kind)


@lru_cache(maxsize=None)
def report(kind: str):
    return analyze(sample(kind))


def write_samples(folder: Path, kinds=("blocking", "pipelined", "mask_sync")) -> dict[str, Path]:
    """Trace files of ``kinds`` plus ``corrupt`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {k: write_trace(sample(k), folder / f"{k}.trace.jsonl") for k in kinds}
    out["corrupt"] = folder / "corrupt.trace.jsonl"
    out["corrupt"].write_text(CORRUPT)
    return out


def span_count(trace: Trace) -> int:
    return len(trace.host_spans) + len(trace.device_spans)


@lru_cache(maxsize=None)
def timeline(kind: str):
    """The timeline arrays the dashboard draws for ``kind`` (the analysis window's bubbles and
    those outside it), as ``TraceStore`` prepares them."""
    from photon_trace.dashboard.sources.store import outside_bubbles
    from photon_trace.dashboard.timeline.data import prepare_timeline
    return prepare_timeline(sample(kind), report(kind), outside_bubbles(sample(kind), report(kind).window))
