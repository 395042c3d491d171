"""An Nsight Systems SQLite export as our records, so every analysis, the dashboard, the
Perfetto export and the CI gate work on ``nsys profile`` reports of any program.

``nsys export --type sqlite report.nsys-rep`` writes the export; ``nsys_read`` opens and
checks it, ``nsys_query`` reads it with SQL (joins and filters in SQLite, tuples out), and
``nsys_to_trace`` here turns those tuples into records, in one place:

* **Device lanes**, one per (process, device, stream): kernels (demangled names), memcpys
  (``Memcpy HtoD (Pageable -> Device)``) and memsets. An op's ``enqueued`` is the start of
  the runtime or driver call that launched it, found by correlation id within its process.
* **Host lanes**, one per thread: runtime and driver calls (``_v3020`` suffixes dropped),
  NVTX ranges (push/pop and start/end; text inline or through ``textId``), OS runtime calls
  where recorded.
* **Host waits**: every synchronising call (device, stream, event and context synchronize,
  driver and runtime forms; blocking ``cudaMemcpy*``/``cudaMemset*``), matched by name, and
  every async copy to or from pageable memory (the mask-upload class of bug). All are
  unexpected, but in our own engine's report a commit's event wait, the one wait its design
  makes. Call sites, steps and phases: ``nsys_steps``.
* **nsys's expert rules** on API calls (``nsys_rules``) in ``header["nsys_rules"]``; the GPU
  rules are analysis (``telemetry/analysis/gpu_rules.py``).
* **Clock**: the export's ns since the session start, device and host alike (CUPTI puts the
  device's times on the host clock); ``clock.wall_ns`` is the session start's wall time.

The header names the analysed stream (``primary_stream``: the one with the most ops), the
host phases, each device lane's device (``stream_devices``), and the profiler's own stalls
that nsys counts as device busy (``profiler_overhead``).
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from photon_trace.telemetry.trace.header import FORMAT_NAME, FORMAT_VERSION, photon_trace_version
from photon_trace.telemetry.trace.importers import nsys_query as q
from photon_trace.telemetry.trace.importers.nsys_read import (
    COPY_KINDS, MEM_KINDS, Export, kind_labels, open_export)
from photon_trace.telemetry.trace.importers.nsys_rules import api_rules
from photon_trace.telemetry.trace.importers.nsys_steps import (
    ENGINE_DOMAIN, NvtxSteps, call_site, innermost_ranges, top_level_names, user_frame)
from photon_trace.telemetry.trace.lanes import IMPORTED_STEP
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, StepRecord, Trace
from photon_trace.telemetry.tracer import TOP_PHASES, Phase

WAIT_NAMES = (
    (re.compile(r"^cu(da)?(Device|Ctx|Thread)Synchronize"), "the whole device"),
    (re.compile(r"^cu(da)?StreamSynchronize"), "a stream"),
    (re.compile(r"^cu(da)?EventSynchronize"), "an event"),
    (re.compile(r"^cu(da)?Memcpy(?!.*Async)"), "a blocking copy"),
    (re.compile(r"^cu(da)?Memset(?!.*Async)"), "a blocking memset"),
)
ASYNC_COPY = re.compile(r"^cu(da)?Memcpy.*Async")
_VERSION_SUFFIX = re.compile(r"_v\d+$")
KIND_NAMES = {q.KERNEL: "kernel", q.MEMCPY: "memcpy", q.MEMSET: "memset"}


def base_name(api: str) -> str:
    """``cudaMemcpy_v3020`` -> ``cudaMemcpy``: the function as the program calls it."""
    return _VERSION_SUFFIX.sub("", api)


def wait_kind(api: str) -> str | None:
    name = base_name(api)
    return next((what for pattern, what in WAIT_NAMES if pattern.match(name)), None)


@dataclass
class NsysRows:
    """What the queries return, before any record is made (``nsys_to_trace`` makes them)."""
    path: str
    meta: dict
    meta_table: str
    step_annotation: str | None
    strings: dict[int, str]
    ops: list[tuple]
    calls: list[tuple]
    nvtx: list[tuple]
    osrt: list[tuple]
    waits: list[tuple]
    frames: dict[int, list[tuple]]
    threads: dict[int, str]
    processes: dict[int, str]
    gpus: dict[int, str]
    mem_kinds: dict[int, str]
    copy_kinds: dict[int, str]
    overhead: list[tuple]
    nvtx_counts: dict[str, int]
    rules: dict
    session_start_ns: int | None
    duplicates: int
    table_rows: dict[str, int] = field(default_factory=dict)


def import_nsys(path: str | os.PathLike, *, step_annotation: str | None = None) -> Trace:
    """Read the Nsight Systems export at ``path`` (``.sqlite`` or ``.sqlite.gz``) as a ``Trace``."""
    x = open_export(path)
    try:
        rows = read_export(x, step_annotation)
    finally:
        x.con.close()
    return nsys_to_trace(rows)


def read_export(x: Export, step_annotation: str | None = None) -> NsysRows:
    """Run every query on an open export (see ``nsys_query``)."""
    duplicates = q.make_calls(x)
    names = q.call_names(x)
    q.set_names(x, "wait_names", [(i, w) for i, n, _ in names if (w := wait_kind(n)) is not None])
    q.set_names(x, "async_copy_names", [(i, "async") for i, n, _ in names if ASYNC_COPY.match(base_name(n))])
    q.make_nvtx(x)
    nvtx = q.nvtx_ranges(x)
    waits = q.wait_calls(x)
    offset = q.callchain_offset(x)
    chains = sorted({w[8] + offset for w in waits if w[8] is not None})
    frames: dict[int, list[tuple]] = {}
    for row in q.callchain_frames(x, chains):
        frames.setdefault(row[0] - offset, []).append(row)
    mem_kinds = kind_labels(x, "ENUM_CUDA_MEM_KIND", MEM_KINDS)
    return NsysRows(
        path=x.path, meta=x.meta, meta_table=x.meta_table, step_annotation=step_annotation,
        strings=dict(x.query("SELECT id, value FROM StringIds")),
        ops=q.device_ops(x), calls=q.host_calls(x), nvtx=nvtx, osrt=q.osrt_calls(x), waits=waits,
        frames=frames, threads=q.thread_names(x), processes=q.process_names(x), gpus=q.gpu_names(x),
        mem_kinds=mem_kinds, copy_kinds=kind_labels(x, "ENUM_CUDA_MEMCPY_OPER", COPY_KINDS),
        overhead=q.profiler_overhead(x), nvtx_counts=dict(q.nvtx_counts(x)), rules=api_rules(x, mem_kinds),
        session_start_ns=q.session_start_ns(x), duplicates=duplicates,
        table_rows={t: x.rows(t) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                           "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                           "NVTX_EVENTS", "OSRT_API") if x.has(t)})


def nsys_to_trace(r: NsysRows) -> Trace:
    """The records of an export, from its query rows: the one place records are made."""
    steps = NvtxSteps(r.nvtx, r.step_annotation, r.path)
    host_lane = _ThreadLanes(r.threads, {c[2] >> 24 & 0xFFFFFF for c in r.calls}
                             | {n[2] >> 24 & 0xFFFFFF for n in r.nvtx})
    s = r.strings

    # Device ops: lane, name and the step of the launch that enqueued each.
    multi = len({o[1] for o in r.ops}) > 1
    lanes: dict[tuple, str] = {}
    devices: dict[str, str] = {}
    for kind, pid, dev, stream, *_ in r.ops:
        if (pid, dev, stream) not in lanes:
            device = f"pid {pid} gpu{dev}" if multi else f"gpu{dev}"
            lanes[(pid, dev, stream)] = f"{device} stream {stream}"
            devices[lanes[(pid, dev, stream)]] = device
    op_names = _op_names(r, s)
    launched = np.array([o[6] if o[6] is not None else o[4] for o in r.ops], dtype=np.int64)
    op_steps = steps.of_many(launched).tolist()
    device_spans = [DeviceSpan(lanes[(pid, dev, stream)], op_names[(kind, key)], st, 0, t0, t1, enq or 0)
                    for (kind, pid, dev, stream, t0, t1, enq, _, key, _), st in zip(r.ops, op_steps)]

    # Host lanes: calls, NVTX ranges (our engine's phases with their step), OS runtime calls.
    names = {i: base_name(v) for i, v in s.items()}

    def step_of(rows: list[tuple]) -> list[int]:
        return steps.of_many(np.fromiter((x[0] for x in rows), np.int64, len(rows))).tolist()

    host = [HostSpan(names[n], st, 0, t0, t1, host_lane(g)) for (t0, t1, g, n, _), st in zip(r.calls, step_of(r.calls))]
    host += [HostSpan(text, int(payload) if steps.engine and dom == ENGINE_DOMAIN and payload is not None
                      else st, 0, t0, t1, host_lane(g))
             for (t0, t1, g, text, dom, payload), st in zip(r.nvtx, step_of(r.nvtx))]
    host += [HostSpan(s.get(n, f"osrt {n}"), st, 0, t0, t1, host_lane(g))
             for (t0, t1, g, n), st in zip(r.osrt, step_of(r.osrt))]
    host.sort(key=lambda h: (h.t0, -h.t1))

    sites = innermost_ranges(r.nvtx, [(w[2], w[0]) for w in r.waits], steps)
    waits = [_wait(r, w, site, st, steps) for w, site, st in zip(r.waits, sites, step_of(r.waits))]
    used = sorted({d.step for d in device_spans} | {h.step for h in host} | {w.step for w in waits})
    count = Counter(d.stream for d in device_spans)
    busy: Counter = Counter()
    for d in device_spans:
        busy[d.stream] += d.t1 - d.t0
    primary = min(count, key=lambda x: (-count[x], -busy[x], x)) if count else None
    phases = sorted(TOP_PHASES) if steps.engine else top_level_names(r.nvtx, steps)
    header = _header(r, steps, primary, phases, devices, lanes, op_names, len(host), len(waits),
                     unlinked=sum(1 for o in r.ops if o[6] is None))
    return Trace(header, host, device_spans, waits, [StepRecord(x, IMPORTED_STEP, 0, 0, 0, 0, 0) for x in used], [])


def _op_names(r: NsysRows, s: dict[int, str]) -> dict[tuple, str]:
    out = {}
    for kind, *_, key, _ in r.ops:
        if (kind, key) in out:
            continue
        if kind == q.KERNEL:
            out[(kind, key)] = s.get(key, f"kernel {key}")
        elif kind == q.MEMCPY:
            out[(kind, key)] = _copy_name(r, key)
        else:
            out[(kind, key)] = f"Memset ({r.mem_kinds.get(key, key)})"
    return out


def _copy_name(r: NsysRows, key: int) -> str:
    copy, src, dst = key >> 16, key >> 8 & 0xFF, key & 0xFF
    return f"Memcpy {r.copy_kinds.get(copy, copy)} ({r.mem_kinds.get(src, src)} -> {r.mem_kinds.get(dst, dst)})"


def _wait(r: NsysRows, w: tuple, site: tuple, step: int, steps: NvtxSteps) -> HostWait:
    t0, t1, _, name_id, what, stream, copy_key, size, chain = w
    nvtx, domain = site
    api = base_name(r.strings.get(name_id, "?"))
    if what == "pageable":
        copy = _copy_name(r, copy_key).removeprefix("Memcpy ") if copy_key is not None else "a copy"
        reason = (f"{api}: {copy} copies pageable host memory"
                  f"{f' ({size} B)' if size is not None else ''}, so the host waits for the stream")
    elif what == "a blocking copy" and copy_key is not None:
        reason = f"{api}: waits for a blocking copy ({_copy_name(r, copy_key).removeprefix('Memcpy ')}, {size} B)"
    else:
        detail = f" (stream {stream})" if stream is not None and stream != q.NO_STREAM else ""
        reason = f"{api}: waits for {what}{detail}"
    # Our engine waits on purpose once a step: its commit waits for the step's copy-back event.
    expected = steps.engine and domain == ENGINE_DOMAIN and nvtx == Phase.COMMIT.span_name and what == "an event"
    frame = user_frame(r.frames.get(chain, []), api) if chain is not None else None
    where = call_site(nvtx, domain, frame, steps.label, steps.found > 0 and step >= 0)
    return HostWait(f"commit: copy-back ({api})" if expected else reason, expected, t0, t1, where, step)


class _ThreadLanes:
    """Host lane names: ``thread TID (name)``, with the process when the report has several."""

    def __init__(self, names: dict[int, str], pids: set[int]):
        self.names, self.multi, self._cache = names, len(pids) > 1, {}

    def __call__(self, gtid: int) -> str:
        lane = self._cache.get(gtid)
        if lane is None:
            tid, pid = gtid & 0xFFFFFF, gtid >> 24 & 0xFFFFFF
            name = self.names.get(gtid)
            lane = (f"pid {pid} " if self.multi else "") + f"thread {tid}" + (f" ({name})" if name else "")
            self._cache[gtid] = lane
        return lane


def _overhead(r: NsysRows, devices: dict[str, str], ops: list[tuple], lanes: dict[tuple, str]) -> dict:
    """Per device, the profiler's stalls inside its first-to-last op range (nsys counts them busy)."""
    extent: dict[str, list[int]] = {}
    pid_of: dict[str, int] = {}
    for kind, pid, dev, stream, t0, t1, *_ in ops:
        d = devices[lanes[(pid, dev, stream)]]
        e = extent.setdefault(d, [t0, t1])
        e[0], e[1] = min(e[0], t0), max(e[1], t1)
        pid_of[d] = pid
    out: dict[str, list[list[int]]] = {}
    for pid, t0, t1 in r.overhead:
        for d, (a, b) in extent.items():
            if pid_of[d] == pid and t0 > a and t1 < b:
                out.setdefault(d, []).append([t0, t1])
    return out


def _header(r: NsysRows, steps: NvtxSteps, primary: str | None, phases: list[str], devices: dict[str, str],
            lanes: dict[tuple, str], op_names: dict[tuple, str], n_host: int, n_waits: int, **counts) -> dict:
    kinds = Counter(o[0] for o in r.ops)
    pids = sorted({o[1] for o in r.ops} | {c[2] >> 24 & 0xFFFFFF for c in r.calls})
    gpus = sorted({r.gpus.get(o[2], f"device {o[2]}") for o in r.ops} or set(r.gpus.values()))
    categories = {"host": {**{base_name(r.strings.get(n, "?")): "cuda driver" if drv else "cuda runtime"
                              for _, _, _, n, drv in r.calls},
                           **{t[3]: "nvtx" for t in r.nvtx},
                           **{r.strings.get(n, f"osrt {n}"): "os runtime" for _, _, _, n in r.osrt}},
                  "device": {name: KIND_NAMES[kind] for (kind, _), name in op_names.items()}}
    return {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "photon_trace_version": photon_trace_version(),
        "trace_level": "imported",
        "settings": {"step_annotation": steps.label or (r.step_annotation or "(none)"), "steps_found": steps.found},
        "model": None, "backend": "nsys", "device": {"name": ", ".join(gpus) if gpus else None},
        "host": {"hostname": None, "pid": pids[0] if len(pids) == 1 else None},
        "clock": {"wall_ns": r.session_start_ns or 0, "mono_ns": 0, "device_error_ns": 1, "resolution_ns": 1},
        "source": {"format": "nsys", "file": Path(r.path).name, "product_version": r.meta.get("EXPORT_PRODUCT_VERSION"),
                   "schema_version": r.meta.get("EXPORT_SCHEMA_VERSION"), "metadata_table": r.meta_table,
                   "session_start_ns": r.session_start_ns, "resolution_ns": 1,
                   "processes": {str(p): r.processes.get(p) for p in pids},
                   "kernels": kinds[q.KERNEL], "memcpys": kinds[q.MEMCPY], "memsets": kinds[q.MEMSET],
                   "runtime_calls": len(r.calls), "duplicate_runtime_rows": r.duplicates,
                   "nvtx_ranges": r.nvtx_counts, "osrt_calls": len(r.osrt), "host_spans": n_host,
                   "host_waits": n_waits, "table_rows": r.table_rows, "problems": {},
                   "engine_domain": steps.engine, **counts},
        "primary_stream": primary,
        "host_phases": phases,
        "stream_devices": devices,
        "profiler_overhead": _overhead(r, devices, r.ops, lanes),
        "nsys_rules": r.rules,
        "categories": categories,
    }
