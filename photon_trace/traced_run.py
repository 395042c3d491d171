"""Traced runs of the standard workload (workload.py): the trace file with a full header, and
the run's JSON summary.

``trace_run`` drives a prepared workload through an engine with a recording
tracer attached and writes the trace file with a full header; ``run_traced``
builds the engine, prepares the workload and does that in one call.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from photon_trace.telemetry.recording.run_cpu import RunCpu
from photon_trace.telemetry.tracer import NULL_TRACER, TraceLevel, Tracer
from photon_trace.workload import PreparedWorkload, RunResult, Workload, drive, engine_settings, prepare


@contextmanager
def attached(engine, tracer: Tracer) -> Iterator[None]:
    """Point the engine's tracer at ``tracer`` for one run, then back to what it was."""
    before = engine.tracer
    engine.set_tracer(tracer)
    try:
        yield
    except BaseException:
        # a run that failed mid-step leaves steps in flight, where no tracer may be swapped:
        # the run's own error is what the caller needs, not the swap's refusal over it
        if engine.idle:
            engine.set_tracer(before)
        raise
    engine.set_tracer(before)


def run_header(engine, prepared: PreparedWorkload, **extra) -> dict[str, Any]:
    """The trace header's run description: settings (engine config, streams, mode, workload)."""
    cfg = engine.config
    settings = {**dataclasses.asdict(cfg), "resolved_dtype": cfg.resolved_dtype(),
                "mode": "pipelined" if cfg.depth == 2 else "blocking",
                "streams": prepared.workload.streams, "workload": prepared.workload.to_dict(),
                "planned_stops": prepared.planned_stops(), **extra}
    header: dict[str, Any] = {"settings": settings, "model": cfg.model, "backend": engine.device.backend,
                              "device": {"name": engine.device.device_name,
                                         "concurrent_streams": engine.device.concurrent_streams}}
    return header


def trace_run(engine, prepared: PreparedWorkload, trace_path: str | Path,
              level: TraceLevel | int = TraceLevel.ON, *, header: dict | None = None,
              on_tokens: Callable[[int], None] | None = None, analyse: bool = True,
              sync_debug: bool = False, keep_outputs: bool = False,
              torch_profiler: str | Path | None = None):
    """One traced run of ``prepared`` on ``engine``: writes ``trace_path``; returns (Trace, summary).
    ``keep_outputs``: the summary also holds ``outputs`` (per request: prompt and generated
    token ids), for comparing runs token by token; not JSON-bound (the bench pops it).

    The recorder keeps everything in its ring buffers until the run ends (no
    flusher thread competing with the scheduler for the interpreter), then
    writes the file in one go. ``sync_debug`` (CUDA only): torch's sync debug
    mode for the run, each synchronizing call recorded as an accidental sync.
    ``torch_profiler``: also record the run with ``torch.profiler`` (each host phase marked
    ``<phase>#<step>``) and write its trace there (``telemetry.profiler_ranges``).
    """
    from photon_trace.telemetry.recording.file_writer import TraceFileWriter
    from photon_trace.telemetry.recording.recorder import RecordingTracer

    # Ring buffers large enough for the whole run: <= 8 records of a kind per step, and
    # at most one step per generated token and prefill chunk of every request.
    bound = sum(r.params.max_tokens + 8 for r in prepared.requests)
    capacity = max(1 << 16, 8 * bound)
    tracer = RecordingTracer(level, sinks=[TraceFileWriter(trace_path)], keep=True,
                             flush_interval_s=None, capacity=capacity,
                             header={**run_header(engine, prepared), **(header or {})})
    capture = engine.device.sync_debug() if sync_debug else None
    engine_tracer, profiling = tracer, _nothing()
    if torch_profiler is not None:
        from photon_trace.telemetry.recording.profiler_ranges import ProfilerRanges, profiled
        engine_tracer = ProfilerRanges(tracer)
        profiling = profiled(torch_profiler, cuda=engine.device.backend == "cuda")
    cpu = RunCpu.start()
    with attached(engine, engine_tracer), (capture if capture is not None else _nothing()), profiling:
        run = drive(engine, prepared.requests, on_tokens)
    host_run = cpu.stop() if cpu is not None else None
    if host_run is not None:     # what the OS did with this thread: comparison.py reads it
        tracer.describe(host_run=host_run)
    tracer.close()
    trace = tracer.snapshot()
    summary = summarize(trace, run, prepared, trace_path, analyse=analyse)
    summary["sync_debug"] = capture is not None
    if keep_outputs:
        summary["outputs"] = {"prompts": run.prompts, "tokens": run.tokens}
    return trace, summary


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def summarize(trace, run: RunResult, prepared: PreparedWorkload, trace_path, *, analyse: bool = True) -> dict:
    """The JSON summary of one traced run (the analysis without its per-step tables)."""
    settings = trace.header.get("settings", {})
    summary: dict[str, Any] = {
        "mode": settings.get("mode"), "streams": prepared.workload.streams,
        "model": trace.header.get("model"), "backend": trace.header.get("backend"),
        "requests": len(prepared.requests), "generated": run.generated, "wall_s": run.wall_s,
        "wall_tokens_per_s": run.generated / run.wall_s if run.wall_s else 0.0,
        "steps": run.steps, "zombie_rows": run.zombie_rows,
        "finish_reasons": dict(Counter(r or "none" for r in run.finish_reasons)),
        "planned_stops": prepared.planned_stops(), "outputs_digest": run.digest(),
        "trace": str(trace_path), "dropped": trace.header.get("dropped", {}),
    }
    if analyse:
        from photon_trace.telemetry.analysis import analyze

        summary["analysis"] = analyze(trace).to_dict(tables=False)
    return summary


def run_traced(engine_kwargs: dict[str, Any], workload: Workload, trace_path: str | Path,
               level: TraceLevel | int = TraceLevel.ON):
    """Build an engine, prepare ``workload`` on it (untraced warm-up), run it traced; (Trace, summary).

    ``engine_kwargs`` are ``Engine`` keyword arguments; sizes the workload needs
    are filled in where not given (see ``engine_settings``).
    """
    from photon_trace.engine.engine import Engine

    engine = Engine(tracer=NULL_TRACER, **engine_settings(workload, **engine_kwargs))
    try:
        prepared = prepare(engine, workload)
        return trace_run(engine, prepared, trace_path, level)
    finally:
        engine.close()
