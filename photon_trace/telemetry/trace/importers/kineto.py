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

The header tells the analysis which stream to analyse first (``primary_stream``, the
one with the most ops) and which host spans are phases (``host_phases``: the top-level cpu ops), and
the dashboard how to group ~hundreds of op names into a few legend entries (``categories``).
"""
from __future__ import annotations

import os
import re
import warnings
from bisect import bisect_right
from collections import Counter, defaultdict
from pathlib import Path

from photon_trace.telemetry.trace.header import FORMAT_NAME, FORMAT_VERSION, photon_trace_version
from photon_trace.telemetry.trace.importers.kineto_graphs import graph_summary
from photon_trace.telemetry.trace.importers.kineto_order import impossible_order, stream_overlaps
from photon_trace.telemetry.trace.importers.kineto_read import (
    DEVICE_CATS, SYNC_CAT, Event, KinetoDoc, KinetoFormatError, KinetoPartialWarning, Problems, read_kineto)
from photon_trace.telemetry.trace.importers.kineto_stack import call_site, sweep
from photon_trace.telemetry.trace.importers.runtime_calls import DEVICE_WAIT_CALLS, SYNC_CALLS, runtime_of
from photon_trace.telemetry.trace.lanes import IMPORTED_STEP
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, StepRecord, Trace

DEFAULT_STEP_ANNOTATION = "ProfilerStep"

HOST_CATEGORY = {"cpu_op": "cpu op", "user_annotation": "annotation", "python_function": "python",
                 "cuda_runtime": "cuda runtime", "cuda_driver": "cuda driver"}
_STEP_NUMBER = re.compile(r"#(\d+)$")


def import_kineto(path: str | os.PathLike, *, step_annotation: str | None = None, strict: bool = True,
                  data: bytes | None = None) -> Trace:
    """Read the Kineto trace at ``path`` as a ``Trace`` (see the module docstring).

    ``strict=False`` imports what is valid of a damaged trace, with warnings; the
    problems are listed in ``header["source"]["problems"]``.
    """
    return kineto_to_trace(read_kineto(path, data, strict=strict), step_annotation=step_annotation,
                           strict=strict)


def kineto_to_trace(doc: KinetoDoc, *, step_annotation: str | None = None, strict: bool = True) -> Trace:
    host = [e for e in doc.events if e.kind in HOST_CATEGORY]
    device = [e for e in doc.events if e.kind in DEVICE_CATS.values()]
    syncs = [e for e in doc.events if e.kind == SYNC_CAT]
    calls = [e for e in host if e.kind in ("cuda_runtime", "cuda_driver")]
    lanes = _ThreadLanes(doc)

    steps = _Steps(host, step_annotation or DEFAULT_STEP_ANNOTATION, explicit=step_annotation is not None,
                   path=doc.path)
    runtime = {e.args["correlation"]: e for e in calls if "correlation" in e.args}
    launch_at = {(e.pid, e.tid, e.t0): e for e in calls}

    # Device ops, per stream lane, with their launches; an impossible order is bad input.
    problems = Problems(doc.path, strict)
    by_stream: dict[str, list[Event]] = defaultdict(list)
    device_spans: list[DeviceSpan] = []
    launched_by: dict[int, Event] = {}        # device event index -> runtime call
    kept: list[Event] = []
    unlinked = 0
    for e in device:
        call = _launch(e, runtime, launch_at, doc)
        wrong = impossible_order(e, call, doc.resolution_ns)
        if wrong is not None:
            problems.report("impossible order", wrong)
            continue
        kept.append(e)
        lane = f"gpu{e.args.get('device', e.pid)} stream {e.args.get('stream', e.tid)}"
        by_stream[lane].append(e)
        if call is None:
            unlinked += 1
            enqueued, step = 0, steps.of(e.t0)
        else:
            launched_by[e.index] = call
            enqueued, step = call.t0, steps.of(call.t0)
        device_spans.append(DeviceSpan(lane, e.name, step, 0, e.t0, e.t1, enqueued))
    device = kept
    for kind, (n, first) in problems.seen.items():
        warnings.warn(f"{doc.path}: skipped {n} device op{'s' if n > 1 else ''} ({kind}); first: {first}",
                      KinetoPartialWarning, stacklevel=3)
    for ops in by_stream.values():
        ops.sort(key=lambda x: (x.t0, x.t1))
    device_spans.sort(key=lambda d: (d.t0, d.t1))
    overlaps = stream_overlaps(by_stream, launched_by, doc.resolution_ns)

    # Host waits, each with the chain of spans open at its start (for its call site).
    pageable = _pageable_copies(device, launched_by, by_stream)
    sync_info = {e.args.get("correlation"): e for e in syncs}
    wait_calls = [e for e in calls if e.name in SYNC_CALLS or id(e) in pageable]
    orphans = [e for e in syncs if e.args.get("correlation") not in runtime
               and e.args.get("cuda_sync_kind") != "Wait Event"]
    chains, top_ops = sweep(host, [(id(e), lanes.key(e), e.t0) for e in wait_calls], lanes.key)
    waits = [HostWait(_reason(e, pageable.get(id(e)), sync_info.get(e.args.get("correlation"))), False,
                      e.t0, e.t1, call_site(chains.get(id(e), []), steps.is_step), steps.of(e.t0))
             for e in wait_calls]
    waits += [HostWait(f"{e.name} (cuda_sync; the runtime call is not in the trace)", False, e.t0, e.t1,
                       "(runtime call not recorded)", steps.of(e.t0)) for e in orphans]
    waits.sort(key=lambda w: (w.t0, w.t1))

    host_spans = sorted((HostSpan(e.name, steps.of(e.t0), 0, e.t0, e.t1, lanes.name(e)) for e in host),
                        key=lambda h: (h.t0, -h.t1))
    used = sorted({d.step for d in device_spans} | {h.step for h in host_spans} | {w.step for w in waits})
    step_records = [StepRecord(s, IMPORTED_STEP, 0, 0, 0, 0, 0) for s in used]

    # The primary stream launches the most ops: compute streams run many short kernels,
    # communication streams few long ones (which mostly wait on other ranks).
    count: Counter = Counter(d.stream for d in device_spans)
    busy: Counter = Counter()
    for d in device_spans:
        busy[d.stream] += d.t1 - d.t0
    primary = min(count, key=lambda s: (-count[s], -busy[s], s)) if count else None
    header = _header(doc, steps, primary, sorted(top_ops), host, device, syncs,
                     unlinked=unlinked, problems=problems.seen,
                     stream_overlaps={lane: o._asdict() for lane, o in sorted(overlaps.items())},
                     graphs=graph_summary(calls, launched_by),
                     runtime=runtime_of([e.name for e in calls], doc.ignored, len(device)),
                     device_waits=sum(1 for e in calls if e.name in DEVICE_WAIT_CALLS))
    return Trace(header, host_spans, device_spans, waits, step_records, [])


def _pageable_copies(device: list[Event], launched_by: dict[int, Event],
                     by_stream: dict[str, list[Event]]) -> dict[int, Event]:
    """id(runtime call) -> the copy it made between the device and pageable host memory.

    CUDA's traces name the memory (``Memcpy DtoH (Device -> Pageable)``). ROCm's say ``Host``
    whatever it was: there a copy counts as pageable when its call returned only after the copy
    ran and the stream still had earlier work when the call was made (the host waited for the
    stream to drain, which a copy from pinned memory does not do)."""
    out: dict[int, Event] = {}
    ends: dict[str, list[tuple[int, int]]] = {}    # lane -> (start, running max end) of its ops
    for dev in device:
        call = launched_by.get(dev.index)
        if call is None or dev.kind != "gpu_memcpy":
            continue
        if "Pageable" in dev.name:
            out[id(call)] = dev
        elif "Host" in dev.name and "Async" in call.name and call.t1 >= dev.t1:
            lane = f"gpu{dev.args.get('device', dev.pid)} stream {dev.args.get('stream', dev.tid)}"
            if _busy_at(ends.setdefault(lane, _reach(by_stream[lane])), call.t0, dev):
                out[id(call)] = dev
    return out


def _reach(ops: list[Event]) -> list[tuple[int, int]]:
    out, reach = [], None
    for op in ops:
        reach = op.t1 if reach is None else max(reach, op.t1)
        out.append((op.t0, reach))
    return out


def _busy_at(reach: list[tuple[int, int]], t: int, copy: Event) -> bool:
    """Whether work queued before ``copy`` on its stream was still running at ``t``."""
    i = bisect_right(reach, (copy.t0, -1)) - 1       # the last op starting before the copy
    return i >= 0 and reach[i][1] > t


def _launch(e: Event, runtime: dict, launch_at: dict, doc: KinetoDoc) -> Event | None:
    """The runtime call that launched device op ``e``: by correlation id, else by its ac2g flow."""
    corr = e.args.get("correlation")
    if corr is not None and corr in runtime:
        return runtime[corr]
    flow = doc.flows_end.get((e.pid, e.tid, e.t0))
    start = doc.flows_start.get(flow) if flow is not None else None
    return launch_at.get(start) if start is not None else None


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


class _ThreadLanes:
    """Host lane names: the profiler's thread names, or ``thread <tid>``."""

    def __init__(self, doc: KinetoDoc):
        self.names = doc.thread_names
        self._cache: dict = {}

    @staticmethod
    def key(e: Event):
        return (e.pid, e.tid)

    def name(self, e: Event) -> str:
        k = (e.pid, e.tid)
        if k not in self._cache:
            self._cache[k] = self.names.get(k) or f"thread {e.tid}"
        return self._cache[k]


class _Steps:
    """Step annotations in time order; ``of(t)`` is the step running at host time ``t``."""

    def __init__(self, host: list[Event], name: str, *, explicit: bool, path: str):
        self.name = name
        marks = sorted((e for e in host if e.kind == "user_annotation" and self._matches(e.name)),
                       key=lambda e: e.t0)
        if explicit and not marks:
            seen = Counter(e.name.split("#")[0] for e in host if e.kind == "user_annotation")
            common = ", ".join(repr(n) for n, _ in seen.most_common(8)) or "none"
            raise KinetoFormatError(f"{path}: no annotation named {name!r} to take steps from "
                                    f"(annotations in the trace: {common})")
        self.marks = marks
        self.starts = [e.t0 for e in marks]
        self.ids = []
        for i, e in enumerate(marks):
            m = _STEP_NUMBER.search(e.name)
            self.ids.append(int(m.group(1)) if m else i)

    def _matches(self, n: str) -> bool:
        return n == self.name or (n.startswith(self.name + "#") and _STEP_NUMBER.search(n) is not None)

    def is_step(self, e: Event) -> bool:
        return e.kind == "user_annotation" and self._matches(e.name)

    def of(self, t: int) -> int:
        if not self.marks:
            return 0
        i = bisect_right(self.starts, t) - 1
        return self.ids[i] if i >= 0 else -1


def _header(doc: KinetoDoc, steps: _Steps, primary: str | None, host_phases: list[str],
            host: list[Event], device: list[Event], syncs: list[Event], **counts) -> dict:
    props = doc.meta.get("deviceProperties") or []
    names = sorted({p.get("name") for p in props if isinstance(p, dict) and p.get("name")})
    base = doc.meta.get("baseTimeNanoseconds")
    problems = {k: {"count": c, "first": m} for k, (c, m) in {**doc.problems, **counts.pop("problems")}.items()}
    categories = {"host": {e.name: HOST_CATEGORY[e.kind] for e in host},
                  "device": {e.name: e.kind.replace("gpu_", "") for e in device}}
    return {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "photon_trace_version": photon_trace_version(),
        "trace_level": "imported", "settings": {"step_annotation": steps.name, "steps_found": len(steps.marks)},
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
                   "cuda_sync_events": len(syncs), "ignored_categories": doc.ignored,
                   "distributed": doc.meta.get("distributedInfo"), "problems": problems,
                   "truncated": doc.truncated, **counts},
        "primary_stream": primary,
        # ops sharing an enqueue came from one graph launch (``analysis/attribution.py``)
        "graph_replays": counts["graphs"]["replayed"],
        "host_phases": host_phases,
        "categories": categories,
        **({"truncated": True} if doc.truncated else {}),
    }
