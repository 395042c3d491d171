"""Traces of millions of events written as a stream, for the scale benchmark and its smoke test.

``write_training_trace`` writes a PyTorch profiler trace of about ``events`` events, gzipped,
step by step: each step is ``kineto_builder.training_step`` (``rich``: nested ops, an HtoD copy
on a third stream), its events encoded and dropped before the next block of steps, so memory
stays that of one block whatever the size. ``write_own_trace`` writes one of our trace files of
about ``spans`` spans: one simulated run (``loop_sim``: a continuous-batching mix with the
synchronous mask upload) repeated back to back, each copy shifted past the previous one in
time, steps and request ids, written chunk by chunk with the file's own encoder
(``trace/file.py``): simulating ten million spans one by one would take the simulator
minutes and its request queue gigabytes. Both are deterministic for a given seed.
"""
from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from photon_trace.telemetry.trace.file import chunk_lines, encode_line, end_line
from photon_trace.telemetry.trace.header import FORMAT_NAME, FORMAT_VERSION
from photon_trace.telemetry.trace.line_file import LineFile
from photon_trace.telemetry.trace.pieces import run_to_end
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk
from photon_trace.telemetry.tracer import TraceLevel

from helpers.kineto_builder import KinetoBuilder, training_step
from helpers.loop_sim import SyntheticRun, synthetic_trace

BLOCK_STEPS = 20          # profiler steps encoded at a time (~10k events at 100 kernels a step)
OWN_BLOCK_STEPS = 2000    # steps of the simulated run that is repeated (~20k spans)


@dataclass
class Written:
    """What a generator wrote: the file, its size, and what it holds."""
    path: Path
    bytes: int
    steps: int
    # a profiler trace's events by "cat" ("ph" for those without one: the names); our file's records by kind
    counts: Counter = field(default_factory=Counter)

    @property
    def events(self) -> int:
        return sum(self.counts.values())


GENERATOR_VERSION = 2   # bump when this module's output changes: bench_scale's cache is keyed by it


def write_training_trace(path: Path, events: int, *, kernels_per_step: int = 100, seed: int = 0,
                         rich: bool = True, compresslevel: int = 3) -> Written:
    """A gzipped profiler trace of whole ProfilerSteps, at least ``events`` events (thread and
    stream names besides), written ``BLOCK_STEPS`` steps at a time."""
    rnd = random.Random(seed)
    b = KinetoBuilder()
    head = b.doc()
    del head["traceEvents"]
    counts: Counter = Counter()
    t, step, first = 1_000_000, 0, True
    with gzip.open(path, "wb", compresslevel=compresslevel) as out:
        # the document's fields, then its events: the array is opened here and closed at the end
        out.write((json.dumps(head)[:-1] + ', "traceEvents": [\n').encode())
        while step == 0 or counts.total() < events:
            for _ in range(BLOCK_STEPS):
                t = training_step(b, rnd, step, t, kernels_per_step, rich=rich)
                step += 1
                if counts.total() + len(b.events) >= events:
                    break
            counts.update(e.get("cat", e["ph"]) for e in b.events)
            out.write(((",\n" if not first else "") + ",\n".join(map(json.dumps, b.events))).encode())
            b.events.clear()
            first = False
        names = b.doc()["traceEvents"]      # no events left: the thread and stream names alone
        counts.update(e["ph"] for e in names)
        out.write(("".join(",\n" + json.dumps(e) for e in names) + "\n]}\n").encode())
    return Written(path, path.stat().st_size, step, counts)


def _shifted(kind: str, rows: list, dt: int, ds: int, dr: int) -> list:
    """``rows`` of record ``kind`` moved ``dt`` ns later, ``ds`` steps and ``dr`` request ids on."""
    if kind == "host_spans":      # phase, step, slot, t0, t1, thread, cpu_ns, runq_ns
        return [(p, s + ds, sl, a + dt, b + dt, th, c, q) for p, s, sl, a, b, th, c, q in rows]
    if kind == "device_spans":    # stream, op, step, slot, t0, t1, enqueued, runq_t0, runq_t1 (counters: as they were)
        return [(st, op, s + ds, sl, a + dt, b + dt, e + dt, *runq) for st, op, s, sl, a, b, e, *runq in rows]
    if kind == "waits":           # reason, expected, t0, t1, site, step, cpu_ns, runq_ns
        return [(r, x, a + dt, b + dt, si, s + ds, c, q) for r, x, a, b, si, s, c, q in rows]
    if kind == "steps":           # step, kind, slot, rows, zombie_rows, constrained_rows, tokens
        return [(s + ds, *rest) for s, *rest in rows]
    if kind == "requests":        # req_id, event, t, tokens
        return [(i + dr, ev, t + dt, n) for i, ev, t, n in rows]
    raise ValueError(f"unknown record kind {kind!r}")


def write_own_trace(path: Path, spans: int, *, seed: int = 0, block_steps: int = OWN_BLOCK_STEPS) -> Written:
    """Our trace file of at least ``spans`` host and device spans: a run of ``block_steps`` steps
    (fewer for a small file: ~10 spans a step) repeated, one chunk line per copy."""
    block_steps = min(block_steps, max(50, spans // 20))
    run = SyntheticRun(steps=block_steps, requests=3 * block_steps, depth=2, mask_upload_bug=True,
                       level=TraceLevel.ON, seed=seed)
    base = synthetic_trace(run)
    per_copy = len(base.host_spans) + len(base.device_spans)
    copies = max(1, -(-spans // per_copy))
    times = [r.t1 for r in base.host_spans] + [r.t1 for r in base.device_spans] + [r.t for r in base.requests]
    t_first = min([r.t0 for r in base.host_spans] + [r.t for r in base.requests])
    period = max(times) - t_first + 1_000_000         # each copy starts 1 ms after the last one ended
    n_steps = max(r.step for r in base.steps) + 1
    n_reqs = max(r.req_id for r in base.requests) + 1
    header = dict(base.header, format=FORMAT_NAME, version=FORMAT_VERSION)
    header["synthetic"] = dict(header.get("synthetic") or {}, steps=n_steps * copies,
                               repeated={"copies": copies, "steps_each": n_steps})
    counts: Counter = Counter()
    out = LineFile(path)
    try:
        out.write(encode_line(header))
        for i in range(copies):
            rows = {k: _shifted(k, getattr(base, k), i * period, i * n_steps, i * n_reqs) for k in RECORD_KINDS}
            data, written = run_to_end(chunk_lines(Chunk(seq=i + 1, **rows)))
            out.write(data, written)
            counts.update(written)
        out.write(end_line(dict(counts)))
    finally:
        out.close()
    return Written(path, path.stat().st_size, n_steps * copies, counts)
