"""A PyTorch profiler (Kineto) trace as our records, so every analysis, the dashboard,
the Perfetto export and the CI gate work on traces of any PyTorch program.

How events map (``kineto_read`` has checked them):

* **Host lanes**, one per thread: ``cpu_op``, ``user_annotation``, ``python_function`` and
  ``cuda_runtime``/``cuda_driver`` events become ``HostSpan``s named after the event.
* **Device lanes**, one per (device, stream): ``kernel``, ``gpu_memcpy`` and ``gpu_memset``
  events become ``DeviceSpan``s. Each is linked to the runtime call that launched it by its
  correlation id (or, lacking one, its ``ac2g`` flow); ``enqueued`` is that call's start,
  as HTA reads it. An op with no launch found counts as enqueued in time.
* **Host waits** from the calls that block the host on the device (``SYNC_CALLS``, CUDA's and
  HIP's: stream, event and device synchronize, blocking memcpys, ``cudaFree``), and from every
  memcpy between the device and *pageable* host memory (the mask-upload class of bug: the
  copy cannot be asynchronous, so the host waits for the stream to drain). ROCm's traces do
  not say whether host memory was pinned (``Memcpy DtoH (Device -> Host)``): there an async
  copy call that returned only after its copy ran, with earlier work still on the stream when
  it was made, waited for the stream like a pageable one, and counts as such. All are
  unexpected: nothing says the program meant them. The call site is the innermost
  enclosing op or annotation and, with Python stacks, the program's own file:line.
  ``cuda_sync`` events add which stream or event was waited on; one with no runtime
  call in the trace becomes a wait of its own. ``cudaStreamWaitEvent`` (a device-side wait,
  the host does not block) is counted in the header; the analysis finds its bubbles as waits
  on another stream. A runtime this importer does not know (``runtime_calls.runtime_of``) is
  named in the header (``source.runtime``): its syncs are unknown, not zero.
* **Order** (``kineto_order``): ops overlapping on one stream (programmatic dependent launch, a
  graph's parallel nodes) are kept and counted; an op that starts before its own launch is bad
  input. **Graphs** (``kineto_graphs``): replays and capture-only traces are said in the header.
* **Steps**: ``ProfilerStep#N`` annotations, or those named ``step_annotation`` (``name`` or
  ``name#N``); a span's step is the last step begun at its start (a device op: at its
  launch), -1 before the first. Without any, the whole trace is step 0.
* **Clock**: integer ns from the µs timestamps; the header says the source's resolution.

**Columns**: ``kineto_read`` keeps each event as a row of columns, and here the host spans
and device ops become ``Columns`` (one array per field) by array operations: the launch
links (``kineto_link``), steps, the sort by time, the per-stream counts. Python runs per
wait (a few per step), not per event.

The header tells the analysis which stream to analyse first (``primary_stream``, the
one with the most ops) and which host spans are phases (``host_phases``: the top-level cpu ops), and
the dashboard how to group ~hundreds of op names into a few legend entries (``categories``).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.distinct import distinct, first_of_each
from photon_trace.telemetry.trace.header import FORMAT_NAME, FORMAT_VERSION, photon_trace_version
from photon_trace.telemetry.trace.importers.kineto_events import (
    CALL_CODES, CODE, DEVICE_CODES, HOST_CODES, KINDS, NESTING_CODES, SYNC_CAT, EventTable)
from photon_trace.telemetry.trace.importers.kineto_graphs import graph_summary
from photon_trace.telemetry.trace.importers.kineto_link import Launches, Steps, by_flow, pageable_copies
from photon_trace.telemetry.trace.importers.kineto_order import impossible_order, stream_overlaps
from photon_trace.telemetry.trace.importers.kineto_read import KinetoDoc, KinetoPartialWarning, Problems, read_kineto
from photon_trace.telemetry.trace.importers.kineto_stack import Nesting, call_site
from photon_trace.telemetry.trace.importers.runtime_calls import DEVICE_WAIT_CALLS, SYNC_CALLS, runtime_of
from photon_trace.telemetry.trace.lanes import IMPORTED_STEP
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, StepRecord, Trace

DEFAULT_STEP_ANNOTATION = "ProfilerStep"

HOST_CATEGORY = {"cpu_op": "cpu op", "user_annotation": "annotation", "python_function": "python",
                 "cuda_runtime": "cuda runtime", "cuda_driver": "cuda driver"}


def import_kineto(path: str | os.PathLike, *, step_annotation: str | None = None, strict: bool = True,
                  data: bytes | None = None) -> Trace:
    """Read the Kineto trace at ``path`` as a ``Trace`` (see the module docstring).

    ``strict=False`` imports what is valid of a damaged trace, with warnings; the
    problems are listed in ``header["source"]["problems"]``.
    """
    return kineto_to_trace(read_kineto(path, data, strict=strict), step_annotation=step_annotation,
                           strict=strict)


def kineto_to_trace(doc: KinetoDoc, *, step_annotation: str | None = None, strict: bool = True) -> Trace:
    ev = doc.events
    kind = ev.kind
    host = np.flatnonzero(np.isin(kind, HOST_CODES))
    device = np.flatnonzero(np.isin(kind, DEVICE_CODES))
    syncs = np.flatnonzero(kind == CODE[SYNC_CAT])
    calls = np.flatnonzero(np.isin(kind, CALL_CODES))
    steps = Steps(ev, host, step_annotation or DEFAULT_STEP_ANNOTATION, explicit=step_annotation is not None,
                  path=doc.path)
    launches = Launches(ev, calls)

    # Device ops with their launches; an impossible order is bad input.
    launcher = launches.by_correlation(device)
    unlinked = launcher < 0
    if unlinked.any():
        launcher[unlinked] = by_flow(ev, device[unlinked], calls, doc.flows_start, doc.flows_end)
    problems = Problems(doc.path, strict)
    launch_t0 = np.where(launcher >= 0, ev.t0[np.maximum(launcher, 0)], 0)
    wrong = (ev.t1[device] < ev.t0[device]) | ((launcher >= 0) & (ev.t0[device] < launch_t0 - doc.resolution_ns))
    for j in np.flatnonzero(wrong).tolist():
        call = ev.event(int(launcher[j])) if launcher[j] >= 0 else None
        problems.report("impossible order", impossible_order(ev.event(int(device[j])), call, doc.resolution_ns))
    if wrong.any():
        keep = ~wrong
        device, launcher, launch_t0 = device[keep], launcher[keep], launch_t0[keep]
    for what, (n, first) in problems.seen.items():
        warnings.warn(f"{doc.path}: skipped {n} device op{'s' if n > 1 else ''} ({what}); first: {first}",
                      KinetoPartialWarning, stacklevel=3)
    linked = launcher >= 0
    d_t0, d_t1 = ev.t0[device], ev.t1[device]
    d_step = steps.of(np.where(linked, launch_t0, d_t0))
    enqueued = np.where(linked, launch_t0, 0)
    lanes = ev.lane[device]

    # Per stream, ops by (start, end): overlaps and, for the copies, what was still running.
    by_lane = np.lexsort((d_t1, d_t0, lanes))
    overlaps = stream_overlaps(lanes[by_lane], d_t0[by_lane], d_t1[by_lane],
                               lambda i: ev.event(int(device[by_lane[i]])),
                               lambda i: _call_name(ev, launcher[by_lane[i]]), doc.resolution_ns)
    pageable = pageable_copies(ev, device, launcher, lanes[by_lane], d_t0[by_lane], d_t1[by_lane])

    # Host waits, each with the spans open at its start (for its call site).
    sync_info = {}
    for r in syncs.tolist():
        e = ev.event(r)
        sync_info[_key(e.args.get("correlation"))] = e
    sync_name = np.array([n in SYNC_CALLS for n in ev.names], dtype=bool)
    is_wait = sync_name[ev.name[calls]] if len(ev.names) else np.zeros(0, dtype=bool)
    if pageable:
        is_wait |= np.isin(calls, list(pageable))
    wait_calls = calls[is_wait].tolist()
    nesting = Nesting(ev, host[np.isin(kind[host], NESTING_CODES)])
    waits = []
    for r in wait_calls:
        e = ev.event(r)
        chain = [ev.event(s) for s in nesting.open_at(int(ev.thread[r]), e.t0)]
        copy = pageable.get(r)
        waits.append(HostWait(_reason(e, ev.event(copy) if copy is not None else None,
                                      sync_info.get(_key(e.args.get("correlation")))),
                              False, e.t0, e.t1, call_site(chain, steps.is_step), steps.at(e.t0)))
    for r in syncs.tolist():
        e = ev.event(r)
        if not launches.has(e.args.get("correlation")) and e.args.get("cuda_sync_kind") != "Wait Event":
            waits.append(HostWait(f"{e.name} (cuda_sync; the runtime call is not in the trace)", False, e.t0, e.t1,
                                  "(runtime call not recorded)", steps.at(e.t0)))
    waits.sort(key=lambda w: (w.t0, w.t1))

    h_t0, h_t1 = ev.t0[host], ev.t1[host]
    h_order = np.lexsort((-h_t1, h_t0))
    h_step = steps.of(h_t0)
    host_spans = _host_columns(doc, ev, host[h_order], h_step[h_order])
    device_spans = _device_columns(ev, device, lanes, d_step, enqueued, np.lexsort((d_t1, d_t0)))
    used = distinct(np.concatenate([d_step, h_step, np.array([w.step for w in waits], dtype=np.int64)]))
    step_records = [StepRecord(int(s), IMPORTED_STEP, 0, 0, 0, 0, 0) for s in used.tolist()]

    # The primary stream launches the most ops: compute streams run many short kernels,
    # communication streams few long ones (which mostly wait on other ranks).
    primary = None
    if len(device):
        count = np.bincount(lanes)
        busy = np.zeros(len(count), dtype=np.int64)
        np.add.at(busy, lanes, d_t1 - d_t0)
        present = np.flatnonzero(count).tolist()
        primary = min((ev.lanes[c] for c in present),
                      key=lambda s: (-count[ev.lanes.index(s)], -busy[ev.lanes.index(s)], s))
    call_names = [ev.names[c] for c in distinct(ev.name[calls]).tolist()]
    header = _header(doc, steps, primary, sorted(nesting.top_level_ops()), ev, host, device, len(syncs),
                     unlinked=int((~linked).sum()), problems=problems.seen,
                     stream_overlaps={ev.lanes[c]: o._asdict() for c, o in
                                      sorted(overlaps.items(), key=lambda x: ev.lanes[x[0]])},
                     graphs=graph_summary(ev, calls, launcher),
                     runtime=runtime_of(call_names, doc.ignored, len(device)),
                     device_waits=int(np.isin(ev.name[calls], [c for c, n in enumerate(ev.names)
                                                               if n in DEVICE_WAIT_CALLS]).sum()))
    return Trace(header, host_spans, device_spans, waits, step_records, [])


def _key(v):
    """A correlation id as a dict key (an unhashable one by its text)."""
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


def _call_name(ev: EventTable, row: int) -> str:
    return ev.names[ev.name[row]] if row >= 0 else ""


def _compact(codes: np.ndarray, table: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes into ``table`` as codes into a table of only the strings used, in order of first use
    (as ``columns.encode`` makes them); equal strings share a code."""
    if not len(codes):
        return codes.astype(np.int32), []
    used, first, inverse = first_of_each(codes)
    order = np.argsort(first, kind="stable")
    texts: dict[str, int] = {}
    remap = np.empty(len(used), dtype=np.int32)
    for rank in order.tolist():
        remap[rank] = texts.setdefault(table[used[rank]], len(texts))
    return remap[inverse.reshape(-1)], list(texts)


def _host_columns(doc: KinetoDoc, ev: EventTable, rows: np.ndarray, step: np.ndarray) -> Columns:
    phase, phases = _compact(ev.name[rows], ev.names)
    lane_of = [doc.thread_names.get(k) if _hashable_pair(k) else None for k in ev.threads]
    lane_text = [name or f"thread {tid}" for name, (_, tid) in zip(lane_of, ev.threads)]
    thread, threads = _compact(ev.thread[rows], lane_text)
    n = len(rows)
    return Columns(HostSpan, {"phase": phase, "step": step.astype(np.int64), "slot": np.zeros(n, dtype=np.int64),
                              "t0": ev.t0[rows], "t1": ev.t1[rows], "thread": thread,
                              "cpu_ns": np.full(n, -1, dtype=np.int64), "runq_ns": np.full(n, -1, dtype=np.int64)},
                   {"phase": phases, "thread": threads})


def _hashable_pair(k) -> bool:
    try:
        hash(k)
    except TypeError:
        return False
    return True


def _device_columns(ev: EventTable, device: np.ndarray, lanes: np.ndarray, step: np.ndarray, enqueued: np.ndarray,
                    order: np.ndarray) -> Columns:
    stream, streams = _compact(lanes[order], ev.lanes)
    op, ops = _compact(ev.name[device[order]], ev.names)
    return Columns(DeviceSpan, {"stream": stream, "op": op, "step": step[order].astype(np.int64),
                                "slot": np.zeros(len(order), dtype=np.int64), "t0": ev.t0[device[order]],
                                "t1": ev.t1[device[order]], "enqueued": enqueued[order].astype(np.int64)},
                   {"stream": streams, "op": ops})


def _reason(call: Event, copy: Event | None, sync: Event | None) -> str:
    if copy is not None:
        size = copy.args.get("bytes")
        return (f"{call.name}: {copy.name.replace('Memcpy ', '')} copies pageable host memory"
                f"{f' ({size} B)' if size is not None else ''}, so the host waits for the stream")
    what = SYNC_CALLS.get(call.name, "")
    detail = ""
    if sync is not None:
        stream = sync.args.get("wait_on_stream", sync.args.get("stream"))
        if isinstance(stream, int) and stream >= 0:
            detail = f" (stream {stream})"
    return f"{call.name}: waits for {what}{detail}" if what else call.name


def _categories(ev: EventTable, rows: np.ndarray, label) -> dict[str, str]:
    """{name: label(kind)} over ``rows`` as a dict built in file order makes it: names in order of
    first appearance, each with the kind of its last."""
    if not len(rows):
        return {}
    names = ev.name[rows]
    used, first, _ = first_of_each(names)
    _, last_rev, _ = first_of_each(names[::-1])
    last = len(names) - 1 - last_rev
    kinds = ev.kind[rows[last]]
    return {ev.names[used[i]]: label(KINDS[kinds[i]]) for i in np.argsort(first, kind="stable").tolist()}


def _header(doc: KinetoDoc, steps: Steps, primary: str | None, host_phases: list[str],
            ev: EventTable, host: np.ndarray, device: np.ndarray, syncs: int, **counts) -> dict:
    props = doc.meta.get("deviceProperties") or []
    names = sorted({p.get("name") for p in props if isinstance(p, dict) and p.get("name")})
    base = doc.meta.get("baseTimeNanoseconds")
    problems = {k: {"count": c, "first": m} for k, (c, m) in {**doc.problems, **counts.pop("problems")}.items()}
    categories = {"host": _categories(ev, host, HOST_CATEGORY.__getitem__),
                  "device": _categories(ev, device, lambda k: k.replace("gpu_", ""))}
    return {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "photon_trace_version": photon_trace_version(),
        "trace_level": "imported", "settings": {"step_annotation": steps.name, "steps_found": steps.count},
        "model": None, "backend": "kineto",
        "device": {"name": ", ".join(names) if names else None},
        "host": {"hostname": doc.meta.get("host_name"), "pid": None},
        # One clock: the profiler's; CUPTI places device times on it, to within its resolution.
        "clock": {"wall_ns": int(base) if isinstance(base, int) else 0, "mono_ns": 0,
                  "device_error_ns": doc.resolution_ns, "resolution_ns": doc.resolution_ns},
        "source": {"format": "kineto", "file": Path(doc.path).name, "schema_version": doc.meta.get("schemaVersion"),
                   "display_time_unit": doc.meta.get("displayTimeUnit"),
                   "base_time_ns": base, "resolution_ns": doc.resolution_ns,
                   "events": doc.n_events, "host_events": len(host), "device_events": len(device),
                   "cuda_sync_events": syncs, "ignored_categories": doc.ignored,
                   "distributed": doc.meta.get("distributedInfo"), "problems": problems,
                   "truncated": doc.truncated, **counts},
        "primary_stream": primary,
        # ops sharing an enqueue came from one graph launch (``analysis/attribution.py``)
        "graph_replays": counts["graphs"]["replayed"],
        "host_phases": host_phases,
        "categories": categories,
        **({"truncated": True} if doc.truncated else {}),
    }
