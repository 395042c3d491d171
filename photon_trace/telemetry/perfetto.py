"""Export a trace to Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev).

Layout: process 1 is the host (a track per host thread), process 2 the device
(a track per stream: compute, copy). Host spans and device ops are complete
("X") events with their step, slot and the step's rows in ``args``; host waits
are slices on the waiting thread's track (``cat`` "host_wait", red when
unexpected). A flow arrow goes from the host slice that enqueued each device
op (the deepest host span of that step around its ``enqueued`` time, falling
back to the step's launch) to the op. Requests are async slices from arrival to
finalized on a "requests" track. Timestamps are µs since the trace's first
record; the monotonic origin is in ``otherData``.

    python -m photon_trace.telemetry.perfetto traces/run.trace.jsonl out.json
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

from photon_trace.telemetry.records import HostSpan, Trace

HOST_PID = 1
DEVICE_PID = 2
STREAM_TIDS = {"compute": 1, "copy": 2}
_PHASE_DEPTH = {"plan": 0, "launch": 0, "commit": 0, "finalize": 0}  # others nest inside these


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


def trace_origin_ns(trace: Trace) -> int:
    """Monotonic ns of ts = 0 in the export: the trace's first record (the dashboard's
    "trace start" axis uses the same origin, so its times match Perfetto's)."""
    firsts = [min(s.t0 for s in trace.host_spans) if trace.host_spans else None,
              min(d.t0 for d in trace.device_spans) if trace.device_spans else None,
              min(w.t0 for w in trace.waits) if trace.waits else None,
              min(r.t for r in trace.requests) if trace.requests else None]
    firsts = [t for t in firsts if t is not None]
    return min(firsts) if firsts else int(trace.header.get("clock", {}).get("mono_ns", 0) or 0)


def chrome_trace(trace: Trace) -> dict:
    """The trace as a trace-event JSON object (``{"traceEvents": [...], ...}``)."""
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
    launches = Counter(s.thread for s in trace.host_spans if s.phase == "launch")
    if launches:
        main = launches.most_common(1)[0][0]
        threads.remove(main)
        threads.insert(0, main)
    else:
        main = threads[0] if threads else "scheduler"
        threads = threads or [main]
    tids = {name: i + 1 for i, name in enumerate(threads)}
    request_tid = len(tids) + 1

    ev: list[dict] = [
        {"ph": "M", "pid": HOST_PID, "name": "process_name",
         "args": {"name": f"host {host.get('hostname', '')} (photon_trace)".replace("  ", " ")}},
        {"ph": "M", "pid": HOST_PID, "name": "process_sort_index", "args": {"sort_index": 0}},
        {"ph": "M", "pid": DEVICE_PID, "name": "process_name",
         "args": {"name": f"device {device_name or ''} ({trace.header.get('backend') or '?'})"}},
        {"ph": "M", "pid": DEVICE_PID, "name": "process_sort_index", "args": {"sort_index": 1}},
    ]
    for name, tid in tids.items():
        ev.append({"ph": "M", "pid": HOST_PID, "tid": tid, "name": "thread_name", "args": {"name": name}})
        ev.append({"ph": "M", "pid": HOST_PID, "tid": tid, "name": "thread_sort_index",
                   "args": {"sort_index": tid}})
    if trace.requests:
        ev.append({"ph": "M", "pid": HOST_PID, "tid": request_tid, "name": "thread_name",
                   "args": {"name": "requests"}})
        ev.append({"ph": "M", "pid": HOST_PID, "tid": request_tid, "name": "thread_sort_index",
                   "args": {"sort_index": request_tid}})
    for stream, tid in STREAM_TIDS.items():
        ev.append({"ph": "M", "pid": DEVICE_PID, "tid": tid, "name": "thread_name",
                   "args": {"name": f"{stream} stream"}})
        ev.append({"ph": "M", "pid": DEVICE_PID, "tid": tid, "name": "thread_sort_index",
                   "args": {"sort_index": tid}})

    slices: list[dict] = []
    by_step: dict[int, list[HostSpan]] = defaultdict(list)
    for s in trace.host_spans:
        by_step[s.step].append(s)
        slices.append({"ph": "X", "pid": HOST_PID, "tid": tids[s.thread], "name": s.phase,
                       "cat": "phase" if s.phase in _PHASE_DEPTH else "subphase",
                       "ts": ts(s.t0), "dur": dur(s.t0, s.t1), "args": step_args(s.step, s.slot)})
    for w in trace.waits:
        slices.append({"ph": "X", "pid": HOST_PID, "tid": tids[main], "name": f"wait: {w.reason}",
                       "cat": "host_wait", "ts": ts(w.t0), "dur": dur(w.t0, w.t1),
                       "cname": "good" if w.expected else "terrible",
                       "args": {"reason": w.reason, "expected": w.expected, "site": w.site,
                                "step": w.step, "wait_us": _us(w.t1 - w.t0)}})

    flows: list[dict] = []
    for i, d in enumerate(trace.device_spans, start=1):
        tid = STREAM_TIDS.get(d.stream, len(STREAM_TIDS) + 1)
        args = step_args(d.step, d.slot)
        args.update(enqueued_us=ts(d.enqueued), queue_delay_us=_us(d.t0 - d.enqueued))
        slices.append({"ph": "X", "pid": DEVICE_PID, "tid": tid, "name": d.op, "cat": "device_op",
                       "ts": ts(d.t0), "dur": dur(d.t0, d.t1), "args": args})
        src = issuer(by_step.get(d.step, ()), d.enqueued)
        if src is None:
            continue
        at = min(max(d.enqueued, src.t0), src.t1)
        flows.append({"ph": "s", "id": i, "pid": HOST_PID, "tid": tids[src.thread], "name": "enqueue",
                      "cat": "flow", "ts": ts(at)})
        flows.append({"ph": "f", "bp": "e", "id": i, "pid": DEVICE_PID, "tid": tid, "name": "enqueue",
                      "cat": "flow", "ts": ts(d.t0 + (d.t1 - d.t0) // 2)})

    # Parents before children at equal start times, so importers nest them.
    slices.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    ev.extend(slices)
    ev.extend(flows)
    ev.extend(_request_events(trace, ts, request_tid))
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {"format": "photon_trace", "mono_origin_ns": origin,
                      "model": str(trace.header.get("model")), "backend": str(trace.header.get("backend")),
                      "photon_trace_version": str(trace.header.get("photon_trace_version"))},
    }


def issuer(spans, t: int) -> HostSpan | None:
    """The deepest host span of a step containing time ``t``, else the step's launch."""
    best = None
    for s in spans:
        if s.t0 <= t <= s.t1 and (best is None or s.t1 - s.t0 < best.t1 - best.t0):
            best = s
    if best is None:
        best = next((s for s in spans if s.phase == "launch"), None)
    return best


def _request_events(trace: Trace, ts, tid: int) -> list[dict]:
    events: dict[int, dict[str, tuple[int, int]]] = defaultdict(dict)
    for r in trace.requests:
        events[r.req_id].setdefault(r.event, (r.t, r.tokens))
    out = []
    for req_id, e in events.items():
        start = e.get("arrival") or e.get("admitted")
        end = e.get("finalized") or e.get("aborted") or e.get("freed")
        if start is None or end is None:
            continue
        args = {"req_id": req_id, "prompt_tokens": start[1], "output_tokens": end[1],
                **{f"{k}_us": ts(v[0]) for k, v in e.items()}}
        common = {"pid": HOST_PID, "tid": tid, "cat": "request", "id": req_id, "name": f"request {req_id}"}
        out.append({**common, "ph": "b", "ts": ts(start[0]), "args": args})
        for k in ("admitted", "first_token"):
            if k in e:
                out.append({**common, "ph": "n", "ts": ts(e[k][0]), "name": k})
        out.append({**common, "ph": "e", "ts": ts(end[0])})
    return out


def write_chrome_trace(trace: Trace, path: str | os.PathLike) -> Path:
    """Write ``chrome_trace(trace)`` as JSON (``.json``; Perfetto also opens ``.json.gz``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(chrome_trace(trace), separators=(",", ":")).encode()
    if path.suffix == ".gz":
        import gzip
        data = gzip.compress(data, 6)
    path.write_bytes(data)
    return path


def main(argv: list[str] | None = None) -> int:
    from photon_trace.telemetry.tracefile import TraceFormatError, load_trace

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (1, 2):
        print("usage: python -m photon_trace.telemetry.perfetto TRACE [OUT.json]", file=sys.stderr)
        return 2
    src = Path(argv[0])
    out = Path(argv[1]) if len(argv) == 2 else src.with_name(src.name.split(".")[0] + ".perfetto.json")
    try:
        trace = load_trace(src)
    except TraceFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_chrome_trace(trace, out)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
