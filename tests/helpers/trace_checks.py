"""Structural checks of a trace: is every committed step complete and causally ordered?

``trace_problems(trace)`` returns one line per violation (empty when the trace
is sound). Tests use it on synthetic and real engine traces; a loader or the
dashboard can use it to warn about a broken trace. Comparisons between device
and host times allow the header's ``clock.device_error_ns``.
"""
from __future__ import annotations

from collections import defaultdict

from photon_trace.telemetry.trace.records import Trace

PARENT_PHASE = {"stage": "launch", "mask_build": "finalize", "mask_upload": "finalize",
                "stream_out": "commit"}


def trace_problems(trace: Trace, max_problems: int = 50) -> list[str]:
    tol = int((trace.header.get("clock") or {}).get("device_error_ns") or 0)
    out: list[str] = []

    def bad(msg: str) -> None:
        if len(out) < max_problems:
            out.append(msg)

    host = defaultdict(lambda: defaultdict(list))   # step -> phase -> spans
    for s in trace.host_spans:
        host[s.step][s.phase].append(s)
        if s.t1 < s.t0:
            bad(f"step {s.step}: {s.phase} ends before it starts")
    dev = defaultdict(lambda: defaultdict(list))    # step -> op -> spans
    for d in trace.device_spans:
        dev[d.step][d.op].append(d)
        if d.t1 < d.t0:
            bad(f"step {d.step}: device {d.op} ends before it starts")
        if d.t0 + tol < d.enqueued:
            bad(f"step {d.step}: device {d.op} starts {d.enqueued - d.t0} ns before it was enqueued")

    for rec in trace.steps:
        i, h, d = rec.step, host[rec.step], dev[rec.step]
        # An idle tick's plan (nothing to launch) carries the next step's index: keep the last
        # plan before the launch. Finalize exists when the step has constrained rows.
        for p in ("launch", "commit"):
            if len(h[p]) != 1:
                bad(f"step {i}: {len(h[p])} {p} spans (expected 1)")
        if not h["plan"]:
            bad(f"step {i}: no plan span")
        if len(h["finalize"]) > 1 or (rec.constrained_rows and not h["finalize"]):
            bad(f"step {i}: {len(h['finalize'])} finalize spans with {rec.constrained_rows} constrained rows")
        if rec.constrained_rows and not d["masked_sample"]:
            bad(f"step {i}: constrained rows but no masked_sample device op")
        fwd = d["forward"] + d["prefill"]
        samples = d["sample"] + d["masked_sample"]
        for name, ops in (("forward/prefill", fwd), ("sample/masked_sample", samples),
                          ("copy_back", d["copy_back"])):
            if not ops:
                bad(f"step {i}: no {name} device op")
        if (len(h["launch"]) != 1 or len(h["commit"]) != 1 or not h["plan"] or len(h["finalize"]) > 1
                or not fwd or not samples or not d["copy_back"]):
            continue
        launch, commit = h["launch"][0], h["commit"][0]
        fin = h["finalize"][0] if h["finalize"] else None
        plans = [p for p in h["plan"] if p.t1 <= launch.t0]
        if not plans:
            bad(f"step {i}: plan ends after launch begins")
        if fin is not None and fin.t0 < launch.t1:
            bad(f"step {i}: finalize begins before launch ends")
        for f in fwd:
            if f.t0 + tol < launch.t0:
                bad(f"step {i}: {f.op} starts before its launch began")
            if not launch.t0 <= f.enqueued <= launch.t1:
                bad(f"step {i}: {f.op} enqueued outside its launch span")
        for m in d["masked_sample"]:
            if fin is None or not fin.t0 <= m.enqueued <= fin.t1:
                bad(f"step {i}: masked_sample enqueued outside its finalize span")
        fwd_end = max(f.t1 for f in fwd)
        for s in samples:
            if s.t0 < fwd_end:
                bad(f"step {i}: {s.op} starts before the forward ended")
        sampled = max(s.t1 for s in samples)
        for c in d["copy_back"]:
            if c.t0 < sampled:
                bad(f"step {i}: copy_back starts before sampling ended")
            if commit.t1 + tol < c.t1:
                bad(f"step {i}: commit ends before its copy_back landed")
        nxt = host[i + 1]["finalize"] if i + 1 in host else None
        if nxt and nxt[0].t0 < commit.t1:
            bad(f"step {i + 1}: finalize begins before commit of step {i} ended")
        for sub, parent in PARENT_PHASE.items():
            for s in h.get(sub, ()):
                p = h[parent][0] if h[parent] else None
                if p is None or not (p.t0 <= s.t0 and s.t1 <= p.t1 and p.thread == s.thread):
                    bad(f"step {i}: {sub} is not inside its {parent}")

    by_stream = defaultdict(list)
    for d in trace.device_spans:
        by_stream[d.stream].append(d)
    for stream, ops in by_stream.items():
        ops.sort(key=lambda d: (d.t0, d.t1))
        for a, b in zip(ops, ops[1:]):
            if b.t0 < a.t1:
                bad(f"{stream} stream: {a.op} of step {a.step} overlaps {b.op} of step {b.step}")

    if trace.host_spans and trace.device_spans:
        lo = min(s.t0 for s in trace.host_spans) - tol
        hi = max(s.t1 for s in trace.host_spans) + tol
        for d in trace.device_spans:
            if d.t0 < lo or d.t1 > hi:
                bad(f"step {d.step}: device {d.op} outside the host time range")

    by_thread = defaultdict(list)
    for s in trace.host_spans:
        by_thread[s.thread].append(s)
    for thread, spans in by_thread.items():
        spans.sort(key=lambda s: (s.t0, -s.t1))
        stack: list = []
        for s in spans:
            while stack and stack[-1].t1 <= s.t0:
                stack.pop()
            if stack and s.t1 > stack[-1].t1:
                p = stack[-1]
                bad(f"thread {thread}: {s.phase} of step {s.step} overlaps {p.phase} of step {p.step} "
                    f"without nesting")
            stack.append(s)
    return out
