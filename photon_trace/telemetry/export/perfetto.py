"""Export a trace to Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev).

Layout: process 1 is the host (a track per host thread), process 2 the device
(a track per stream: compute, copy, then any other, such as an imported trace's, and a
"bubbles" track). Host spans and device ops are complete ("X") events with their step,
slot and the step's rows in ``args`` (the time the engine had nothing to run, ``no_work``, a grey
"no work" slice of ``cat`` "no_work": no bubble); host waits are slices on the waiting thread's track
(the thread with the shortest span open around the wait, else the launching thread;
``cat`` "host_wait", red when unexpected), and each unexpected one is also an instant ("i") named after its call
site, with the device idle it caused. A flow arrow goes from the host slice that
enqueued each device op (the deepest host span of that step around its ``enqueued``
time, falling back to the step's launch) to the op. Bubbles (device idle gaps, with
their cause, detail and whether host code can fix them) are slices on the "bubbles"
track. Each device's idle with all its streams together (Nsight's view: ``device_idle``) is a
process of its own ("<device> idle, all streams together", from ``IDLE_PID``) with a slice per
stretch in which none of its streams ran, those over nsys's 500 ms ``gpu_gaps`` threshold
marked; ``otherData.device_idle`` lists the longest. Requests are async slices from arrival to finalized on a "requests" track.
Timestamps are µs since the trace's first record; the monotonic origin is in
``otherData``.

The file is written event by event (``write_chrome_trace``), so memory stays the
trace's own plus a small buffer, however long the trace.

    photon-trace export perfetto traces/run.trace.jsonl out.json      (cli/export.py)

The command also reads a PyTorch profiler trace or an Nsight Systems export (through
``trace.importers.load_any``).
"""
from __future__ import annotations

import gzip
import heapq
import io
import json
import os
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from photon_trace.telemetry.analysis.causes import Cause, cause_label, who_fixes
from photon_trace.telemetry.trace.records import HostSpan, Trace
from photon_trace.telemetry.trace.time import issuer, trace_origin_ns
from photon_trace.telemetry.tracer import NO_WORK, TOP_PHASES, Phase

SERVE = Phase.SERVE.span_name   # the server loop between ticks: its own category, no tick's sub-phase

HOST_PID = 1
DEVICE_PID = 2
IDLE_PID = 3        # and on: one process per device for its idle, all streams together
STREAM_ORDER = ("compute", "copy")
BUBBLES_TRACK = "bubbles (device idle, by cause)"


def _ran(r) -> dict:
    """Whether the host ran: the thread's on-CPU and run-queue time over a span or wait (where recorded)."""
    return {"on_cpu_us": _us(r.cpu_ns), **({"runq_us": _us(r.runq_ns)} if r.runq_ns >= 0 else {})} if r.cpu_ns >= 0 else {}


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


def _waiters(trace: Trace, default: str) -> list[str]:
    """Per wait, the thread it happened on: the one with the shortest host span open at its start."""
    spans = sorted(trace.host_spans, key=lambda h: h.t0)
    order = sorted(range(len(trace.waits)), key=lambda i: trace.waits[i].t0)
    out = [default] * len(trace.waits)
    open_: list[tuple[int, int, str]] = []   # heap of (t1, -t0, thread): what has begun and not ended
    k = 0
    for i in order:
        t = trace.waits[i].t0
        while k < len(spans) and spans[k].t0 <= t:
            heapq.heappush(open_, (spans[k].t1, -spans[k].t0, spans[k].thread))
            k += 1
        while open_ and open_[0][0] <= t:
            heapq.heappop(open_)
        if open_:
            out[i] = min(open_, key=lambda e: e[0] + e[1])[2]
    return out


def trace_events(trace: Trace, bubbles: list | None = None,
                 window: tuple[int, int] | None = None, device_idle: list | None = None) -> Iterator[dict]:
    """The trace's events one by one; ``bubbles`` (analysis ``Bubble`` records) add the
    bubbles track and each accidental sync's caused idle; ``window`` marks which were counted;
    ``device_idle`` (``(device, t0, t1)`` stretches) adds a track of idle per device."""
    origin = trace_origin_ns(trace)
    steps = {s.step: s for s in trace.steps}

    def ts(t: int) -> float:
        return _us(t - origin)

    def dur(t0: int, t1: int) -> float:
        return max(0.0, round(ts(t1) - ts(t0), 3))

    def step_args(step: int, slot: int) -> dict:
        args = {"step": step, "slot": slot}
        rec = steps.get(step)
        if rec is not None:
            args.update(kind=rec.kind, rows=rec.rows, zombie_rows=rec.zombie_rows,
                        constrained_rows=rec.constrained_rows, tokens=rec.tokens)
        return args

    host = trace.header.get("host", {}) or {}
    device = trace.header.get("device", {}) or {}
    device_name = device.get("name") if isinstance(device, dict) else device
    threads = list(dict.fromkeys(s.thread for s in trace.host_spans))
    # The scheduler thread (the one that launches) gets tid 1 and the host waits.
    launches = Counter(s.thread for s in trace.host_spans if s.phase == Phase.LAUNCH.span_name)
    if launches:
        main = launches.most_common(1)[0][0]
        threads.remove(main)
        threads.insert(0, main)
    else:
        main = threads[0] if threads else "scheduler"
        threads = threads or [main]
    tids = {name: i + 1 for i, name in enumerate(threads)}
    request_tid = len(tids) + 1
    present = {d.stream for d in trace.device_spans}
    streams = [x for x in STREAM_ORDER if x in present] + sorted(present - set(STREAM_ORDER)) or ["compute"]
    stream_tids = {x: i + 1 for i, x in enumerate(streams)}
    bubble_tid = len(stream_tids) + 1

    yield {"ph": "M", "pid": HOST_PID, "name": "process_name",
           "args": {"name": f"host {host.get('hostname', '')} (photon_trace)".replace("  ", " ")}}
    yield {"ph": "M", "pid": HOST_PID, "name": "process_sort_index", "args": {"sort_index": 0}}
    yield {"ph": "M", "pid": DEVICE_PID, "name": "process_name",
           "args": {"name": f"device {device_name or ''} ({trace.header.get('backend') or '?'})"}}
    yield {"ph": "M", "pid": DEVICE_PID, "name": "process_sort_index", "args": {"sort_index": 1}}
    named = [(HOST_PID, tid, name) for name, tid in tids.items()]
    named += [(HOST_PID, request_tid, "requests")] if trace.requests else []
    named += [(DEVICE_PID, tid, x if "stream" in x else f"{x} stream") for x, tid in stream_tids.items()]
    named += [(DEVICE_PID, bubble_tid, BUBBLES_TRACK)] if bubbles else []
    for pid, tid, name in named:
        yield {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}
        yield {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}

    # Host slices and waits per track, parents before children at equal start times (so
    # importers nest them): sorted as indices, never as a second copy of the events.
    hs, ws = trace.host_spans, trace.waits
    n = len(hs)
    track = np.fromiter((tids[s.thread] for s in hs), np.int64, n)
    t0 = np.fromiter((s.t0 for s in hs), np.int64, n)
    length = np.fromiter((s.t1 - s.t0 for s in hs), np.int64, n)
    waiters = [tids[t] for t in _waiters(trace, main)]
    track = np.concatenate([track, np.fromiter(waiters, np.int64, len(ws))])
    t0 = np.concatenate([t0, np.fromiter((w.t0 for w in ws), np.int64, len(ws))])
    length = np.concatenate([length, np.fromiter((w.t1 - w.t0 for w in ws), np.int64, len(ws))])
    order = np.lexsort((np.arange(len(t0)), -length, t0, track))
    del track, t0, length
    for i in order.tolist():
        if i < n:
            s = hs[i]
            if s.phase == NO_WORK:     # the engine had nothing to run: neutral, no bubble
                yield {"ph": "X", "pid": HOST_PID, "tid": tids[s.thread], "name": "no work", "cat": NO_WORK,
                       "cname": "grey", "ts": ts(s.t0), "dur": dur(s.t0, s.t1), "args": step_args(s.step, s.slot)}
                continue
            yield {"ph": "X", "pid": HOST_PID, "tid": tids[s.thread], "name": s.phase,
                   "cat": "phase" if s.phase in TOP_PHASES else SERVE if s.phase == SERVE else "subphase",
                   "ts": ts(s.t0), "dur": dur(s.t0, s.t1), "args": {**step_args(s.step, s.slot), **_ran(s)}}
        else:
            w = ws[i - n]
            yield {"ph": "X", "pid": HOST_PID, "tid": waiters[i - n], "name": f"wait: {w.reason}",
                   "cat": "host_wait", "ts": ts(w.t0), "dur": dur(w.t0, w.t1),
                   "cname": "good" if w.expected else "terrible",
                   "args": {"reason": w.reason, "expected": w.expected, "site": w.site,
                            "step": w.step, "wait_us": _us(w.t1 - w.t0), **_ran(w)}}
    del order

    by_step: dict[int, list[HostSpan]] = defaultdict(list)
    for s in hs:
        by_step[s.step].append(s)
    for i, d in enumerate(trace.device_spans, start=1):
        tid = stream_tids[d.stream]
        args = step_args(d.step, d.slot)
        args.update(enqueued_us=ts(d.enqueued), queue_delay_us=_us(d.t0 - d.enqueued))
        yield {"ph": "X", "pid": DEVICE_PID, "tid": tid, "name": d.op, "cat": "device_op",
               "ts": ts(d.t0), "dur": dur(d.t0, d.t1), "args": args}
        src = issuer(by_step.get(d.step, ()), d.enqueued)
        if src is None:
            continue
        at = min(max(d.enqueued, src.t0), src.t1)
        yield {"ph": "s", "id": i, "pid": HOST_PID, "tid": tids[src.thread], "name": "enqueue",
               "cat": "flow", "ts": ts(at)}
        yield {"ph": "f", "bp": "e", "id": i, "pid": DEVICE_PID, "tid": tid, "name": "enqueue",
               "cat": "flow", "ts": ts(d.t0 + (d.t1 - d.t0) // 2)}

    if bubbles:
        for b in sorted(bubbles, key=lambda b: b.t0):
            counted = window is None or (b.t0 >= window[0] and b.t1 <= window[1])
            yield {"ph": "X", "pid": DEVICE_PID, "tid": bubble_tid, "name": f"bubble: {cause_label(b.cause)}",
                   "cat": "bubble", "ts": ts(b.t0), "dur": dur(b.t0, b.t1),
                   "cname": "terrible" if b.cause == Cause.ACCIDENTAL_SYNC else "grey",
                   "args": {"cause": b.cause, "detail": b.detail, "step": b.step, "idle_us": _us(b.t1 - b.t0),
                            "who_can_fix_it": who_fixes(b.cause), "counted_in_analysis_window": counted}}
    yield from _device_idle_events(device_idle or [], ts, dur)
    yield from _sync_instants(trace, bubbles or [], ts, tids[main])
    yield from _request_events(trace, ts, request_tid)


def _device_idle_events(stretches: list, ts, dur) -> Iterator[dict]:
    """A process per device, below the device's streams: a slice per stretch none of its streams ran."""
    from photon_trace.telemetry.analysis.gpu_rules import GAP_MS
    pids = {d: IDLE_PID + i for i, d in enumerate(sorted({d for d, _, _ in stretches}))}
    for d, pid in pids.items():
        yield {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"{d} idle, all streams together"}}
        yield {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}}
    for d, a, b in stretches:
        yield {"ph": "X", "pid": pids[d], "tid": 1, "name": f"{d} idle", "cat": "device_idle", "ts": ts(a),
               "dur": dur(a, b), "cname": "grey",
               "args": {"device": d, "idle_us": _us(b - a), "gpu_gaps": b - a > GAP_MS * 1_000_000}}


def _sync_instants(trace: Trace, bubbles: list, ts, tid: int) -> Iterator[dict]:
    """An instant per accidental sync, named by its call site, with the idle it caused (the
    accidental-sync bubbles of its site until the next wait there)."""
    waits = sorted((w for w in trace.waits if not w.expected), key=lambda w: w.t0)
    starts: dict[str, list[int]] = defaultdict(list)
    for w in waits:
        starts[w.site].append(w.t0)
    caused: dict[tuple[str, int], int] = defaultdict(int)
    for b in bubbles:
        if b.cause == Cause.ACCIDENTAL_SYNC and b.detail in starts:
            k = bisect_right(starts[b.detail], b.t1) - 1
            if k >= 0:
                caused[(b.detail, starts[b.detail][k])] += b.t1 - b.t0
    for w in waits:
        yield {"ph": "i", "s": "t", "pid": HOST_PID, "tid": tid, "name": f"{Cause.ACCIDENTAL_SYNC.label}: {w.site}",
               "cat": Cause.ACCIDENTAL_SYNC, "ts": ts(w.t0),
               "args": {"site": w.site, "reason": w.reason, "step": w.step, "wait_us": _us(w.t1 - w.t0),
                        "device_idle_caused_us": _us(caused.get((w.site, w.t0), 0))}}


def _request_events(trace: Trace, ts, tid: int) -> Iterator[dict]:
    events: dict[int, dict[str, tuple[int, int]]] = defaultdict(dict)
    for r in trace.requests:
        events[r.req_id].setdefault(r.event, (r.t, r.tokens))
    for req_id, e in events.items():
        start = e.get("arrival") or e.get("admitted")
        end = e.get("finalized") or e.get("aborted") or e.get("freed")
        if start is None or end is None:
            continue
        args = {"req_id": req_id, "prompt_tokens": start[1], "output_tokens": end[1],
                **{f"{k}_us": ts(v[0]) for k, v in e.items()}}
        common = {"pid": HOST_PID, "tid": tid, "cat": "request", "id": req_id, "name": f"request {req_id}"}
        yield {**common, "ph": "b", "ts": ts(start[0]), "args": args}
        for k in ("admitted", "first_token"):
            if k in e:
                yield {**common, "ph": "n", "ts": ts(e[k][0]), "name": k}
        yield {**common, "ph": "e", "ts": ts(end[0])}


def _other_data(trace: Trace, device_idle: list | None = None) -> dict:
    out = {"format": "photon_trace", "mono_origin_ns": trace_origin_ns(trace),
           "model": str(trace.header.get("model")), "backend": str(trace.header.get("backend")),
           "photon_trace_version": str(trace.header.get("photon_trace_version"))}
    if device_idle:
        from photon_trace.telemetry.analysis.gpu_rules import GAP_MS
        longest = sorted(device_idle, key=lambda x: x[1] - x[2])[:50]
        out["device_idle"] = [{"device": d, "ts_us": _us(a - out["mono_origin_ns"]), "idle_us": _us(b - a),
                               "gpu_gaps": b - a > GAP_MS * 1_000_000} for d, a, b in longest]
    return out


def chrome_trace(trace: Trace, bubbles: list | None = None, window: tuple[int, int] | None = None,
                 device_idle: list | None = None) -> dict:
    """The trace as one trace-event JSON object (``{"traceEvents": [...], ...}``), in memory."""
    return {"traceEvents": list(trace_events(trace, bubbles, window, device_idle)), "displayTimeUnit": "ns",
            "otherData": _other_data(trace, device_idle)}


def analysed_device_idle(trace: Trace) -> list[tuple[str, int, int]]:
    """Each device's idle stretches, all its streams together (``analysis.device_idle``)."""
    from photon_trace.telemetry.analysis.device_idle import idle_stretches
    return idle_stretches(trace)


def analysed_bubbles(trace: Trace) -> tuple[list, tuple[int, int]]:
    """The bubbles of the whole trace (classified as the dashboard marks them) and the steady-state window."""
    from photon_trace.telemetry.analysis import find_bubbles, steady_state_window
    from photon_trace.telemetry.analysis.window import compute_extent
    return find_bubbles(trace, compute_extent(trace)), steady_state_window(trace)


def write_chrome_trace(trace: Trace, path: str | os.PathLike, *, bubbles: bool = True,
                       buffer_events: int = 4096) -> Path:
    """Write the trace-event JSON (``.json``; ``.json.gz`` compressed) event by event;
    ``bubbles`` adds the analysis' bubbles track and the syncs' caused idle."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    found, window = analysed_bubbles(trace) if bubbles and trace.device_spans else ([], None)
    raw = gzip.open(path, "wb", compresslevel=6) if path.suffix == ".gz" else open(path, "wb")
    with raw, io.TextIOWrapper(raw, encoding="utf-8") as out:
        out.write('{"traceEvents":[')
        chunk: list[str] = []
        first = True
        idle = analysed_device_idle(trace) if bubbles and trace.device_spans else None
        for ev in trace_events(trace, found, window, idle):
            chunk.append(json.dumps(ev, separators=(",", ":")))
            if len(chunk) >= buffer_events:
                out.write(("" if first else ",") + ",".join(chunk))
                first, chunk = False, []
        if chunk:
            out.write(("" if first else ",") + ",".join(chunk))
        out.write('],"displayTimeUnit":"ns","otherData":' + json.dumps(_other_data(trace, idle)) + "}")
    return path
