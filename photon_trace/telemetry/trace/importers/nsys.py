"""An Nsight Systems SQLite export as our records, so every analysis, the dashboard, the
Perfetto export and the CI gate work on ``nsys profile`` reports of any program.

``nsys export --type sqlite report.nsys-rep`` writes the export; ``nsys_read`` opens and
checks it, ``nsys_query`` reads it with SQL (joins and filters in SQLite, tuples out),
``nsys_arrays`` reads its large tables (device ops, runtime and OS runtime calls) as numpy
arrays, and ``nsys_to_trace`` here turns both into records, in one place: device ops and host
spans (``nsys_host``) as ``Columns``, made by array operations, waits as a list:

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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from photon_trace.telemetry.trace.columns import Columns
from photon_trace.telemetry.trace.header import FORMAT_NAME, FORMAT_VERSION, photon_trace_version
from photon_trace.telemetry.trace.importers import nsys_arrays as a
from photon_trace.telemetry.trace.importers import nsys_query as q
from photon_trace.telemetry.trace.importers.nsys_arrays import HostArrays, OpArrays
from photon_trace.telemetry.trace.importers.nsys_host import base_name, host_columns
from photon_trace.telemetry.trace.importers.nsys_read import (
    COPY_KINDS, MEM_KINDS, Export, check_fits, kind_labels, open_export)
from photon_trace.telemetry.trace.importers.nsys_rules import api_rules
from photon_trace.telemetry.trace.importers.nsys_steps import (
    ENGINE_DOMAIN, NvtxSteps, call_site, innermost_ranges, top_level_names, user_frame)
from photon_trace.telemetry.trace.lanes import IMPORTED_STEP
from photon_trace.telemetry.trace.records import DeviceSpan, HostWait, StepRecord, Trace
from photon_trace.telemetry.tracer import TOP_PHASES, Phase

WAIT_NAMES = (
    (re.compile(r"^cu(da)?(Device|Ctx|Thread)Synchronize"), "the whole device"),
    (re.compile(r"^cu(da)?StreamSynchronize"), "a stream"),
    (re.compile(r"^cu(da)?EventSynchronize"), "an event"),
    (re.compile(r"^cu(da)?Memcpy(?!.*Async)"), "a blocking copy"),
    (re.compile(r"^cu(da)?Memset(?!.*Async)"), "a blocking memset"),
)
ASYNC_COPY = re.compile(r"^cu(da)?Memcpy.*Async")
KIND_NAMES = {q.KERNEL: "kernel", q.MEMCPY: "memcpy", q.MEMSET: "memset"}


def wait_kind(api: str) -> str | None:
    name = base_name(api)
    return next((what for pattern, what in WAIT_NAMES if pattern.match(name)), None)


@dataclass
class NsysRows:
    """What the queries return, before any record is made (``nsys_to_trace`` makes them): the
    large tables as arrays (``nsys_arrays``), the rest as tuples."""
    path: str
    meta: dict
    meta_table: str
    step_annotation: str | None
    strings: dict[int, str]
    ops: OpArrays
    calls: HostArrays
    nvtx: list[tuple]
    osrt: HostArrays
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
    """Run every query on an open export (see ``nsys_query`` and ``nsys_arrays``)."""
    table_rows = check_fits(x)       # refused up front when it cannot fit in memory
    duplicates = q.make_calls(x)
    strings = dict(x.query("SELECT id, value FROM StringIds"))
    calls = a.host_calls(x)
    names = [(i, strings[i]) for i in a.distinct(calls.name_id) if i in strings]   # every function called
    q.set_names(x, "wait_names", [(i, w) for i, n in names if (w := wait_kind(n)) is not None])
    q.set_names(x, "async_copy_names", [(i, "async") for i, n in names if ASYNC_COPY.match(base_name(n))])
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
        strings=strings, ops=a.device_ops(x), calls=calls, nvtx=nvtx, osrt=a.osrt_calls(x), waits=waits,
        frames=frames, threads=q.thread_names(x), processes=q.process_names(x), gpus=q.gpu_names(x),
        mem_kinds=mem_kinds, copy_kinds=kind_labels(x, "ENUM_CUDA_MEMCPY_OPER", COPY_KINDS),
        overhead=q.profiler_overhead(x), nvtx_counts=dict(q.nvtx_counts(x)), rules=api_rules(x, mem_kinds),
        session_start_ns=q.session_start_ns(x), duplicates=duplicates,
        table_rows=table_rows)


def nsys_to_trace(r: NsysRows) -> Trace:
    """The records of an export, from its query rows: the one place records are made. Device ops
    and host spans become ``Columns`` by array operations; Python runs per lane, per name, per
    NVTX range and per wait, not per op or call."""
    steps = NvtxSteps(r.nvtx, r.step_annotation, r.path)
    ops = r.ops

    # Device ops: lane, name and the step of the launch that enqueued each.
    multi = len({lane[0] for lane in ops.lanes}) > 1
    lanes: list[str] = []
    devices: dict[str, str] = {}
    for pid, dev, stream, *_ in ops.lanes:
        device = f"pid {pid} gpu{dev}" if multi else f"gpu{dev}"
        lanes.append(f"{device} stream {stream}")
        devices[lanes[-1]] = device
    op_names = [_op_name(r, kind, key) for kind, key in ops.names]
    op_step = steps.of_many(np.where(ops.linked, ops.enqueued, ops.t0))
    op, op_table = a.first_use(ops.name, op_names)
    n = len(ops)
    device_spans = Columns(DeviceSpan, {"stream": ops.lane.astype(np.int32), "op": op, "step": op_step,
                                        "slot": np.zeros(n, dtype=np.int64), "t0": ops.t0, "t1": ops.t1,
                                        "enqueued": ops.enqueued}, {"stream": lanes, "op": op_table})

    host, host_categories = host_columns(r.calls, r.osrt, r.nvtx, r.strings, r.threads, steps)
    sites = innermost_ranges(r.nvtx, [(w[2], w[0]) for w in r.waits], steps)
    w_step = steps.of_many(np.fromiter((w[0] for w in r.waits), np.int64, len(r.waits))).tolist()
    waits = [_wait(r, w, site, st, steps) for w, site, st in zip(r.waits, sites, w_step)]
    used = sorted(set(a.distinct(op_step)) | set(a.distinct(host.arrays["step"])) | set(w_step))
    primary = min(range(len(lanes)), key=lambda i: (-ops.lanes[i][3], -ops.lanes[i][4], lanes[i]), default=None)
    phases = sorted(TOP_PHASES) if steps.engine else top_level_names(r.nvtx, steps)
    categories = {"host": host_categories,
                  "device": {name: KIND_NAMES[kind] for (kind, _), name in zip(ops.names, op_names)}}
    header = _header(r, steps, lanes[primary] if primary is not None else None, phases, devices, lanes,
                     categories, len(host), len(waits), unlinked=int(n - np.count_nonzero(ops.linked)))
    return Trace(header, host, device_spans, waits, [StepRecord(x, IMPORTED_STEP, 0, 0, 0, 0, 0) for x in used], [])


def _op_name(r: NsysRows, kind: int, key: int) -> str:
    if kind == q.KERNEL:
        return r.strings.get(key, f"kernel {key}")
    if kind == q.MEMCPY:
        return _copy_name(r, key)
    return f"Memset ({r.mem_kinds.get(key, key)})"


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


def _overhead(r: NsysRows, devices: dict[str, str], lanes: list[str]) -> dict:
    """Per device, the profiler's stalls inside its first-to-last op range (nsys counts them busy)."""
    extent: dict[str, list[int]] = {}
    pid_of: dict[str, int] = {}
    for (pid, _, _, _, _, t0, t1), lane in zip(r.ops.lanes, lanes):
        d = devices[lane]
        e = extent.setdefault(d, [t0, t1])
        e[0], e[1] = min(e[0], t0), max(e[1], t1)
        pid_of[d] = pid
    out: dict[str, list[list[int]]] = {}
    for pid, t0, t1 in r.overhead:
        for d, (lo, hi) in extent.items():
            if pid_of[d] == pid and t0 > lo and t1 < hi:
                out.setdefault(d, []).append([t0, t1])
    return out


def _header(r: NsysRows, steps: NvtxSteps, primary: str | None, phases: list[str], devices: dict[str, str],
            lanes: list[str], categories: dict, n_host: int, n_waits: int, **counts) -> dict:
    kinds = r.ops.kinds
    call_pids = set((a.distinct_codes(r.calls.gtid)[0] >> 24 & 0xFFFFFF).tolist())
    pids = sorted({lane[0] for lane in r.ops.lanes} | call_pids)
    gpus = sorted({r.gpus.get(lane[1], f"device {lane[1]}") for lane in r.ops.lanes} or set(r.gpus.values()))
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
                   "kernels": kinds.get(q.KERNEL, 0), "memcpys": kinds.get(q.MEMCPY, 0),
                   "memsets": kinds.get(q.MEMSET, 0),
                   "runtime_calls": len(r.calls), "duplicate_runtime_rows": r.duplicates,
                   "nvtx_ranges": r.nvtx_counts, "osrt_calls": len(r.osrt), "host_spans": n_host,
                   "host_waits": n_waits, "table_rows": r.table_rows, "problems": {},
                   "engine_domain": steps.engine, **counts},
        "primary_stream": primary,
        "host_phases": phases,
        "stream_devices": devices,
        "profiler_overhead": _overhead(r, devices, lanes),
        "nsys_rules": r.rules,
        "categories": categories,
    }
