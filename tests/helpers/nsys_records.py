"""The Nsight importer's record path before it made columns, kept as the reference the columnar
path must equal (issue 31: "nothing changes in the answers").

Until the scale work, ``nsys_query`` fetched every device op, runtime call and OS runtime call
as a Python tuple and ``nsys.nsys_to_trace`` made one ``DeviceSpan``/``HostSpan`` per tuple, in
lists. Those queries and that loop are kept here, verbatim in substance; the parts the columnar
path did not change (NVTX ranges, waits, steps, rules, the header's small tables) are read with
the importer's own ``read_export``, so a difference can only come from the tables now read as
arrays and the records made from them.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from photon_trace.telemetry.trace.importers import nsys_query as q
from photon_trace.telemetry.trace.importers.nsys import (
    KIND_NAMES, NsysRows, _copy_name, _wait, read_export)
from photon_trace.telemetry.trace.importers.nsys_host import ThreadLanes, base_name
from photon_trace.telemetry.trace.importers.nsys_read import open_export
from photon_trace.telemetry.trace.importers.nsys_steps import (
    ENGINE_DOMAIN, NvtxSteps, innermost_ranges, top_level_names)
from photon_trace.telemetry.trace.lanes import IMPORTED_STEP
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, StepRecord, Trace
from photon_trace.telemetry.tracer import TOP_PHASES


def import_records(path: str | Path, *, step_annotation: str | None = None) -> Trace:
    """The export at ``path`` as the record path made it: lists of records."""
    x = open_export(path)
    try:
        r = read_export(x, step_annotation)
        ops, calls, osrt = _device_ops(x), _host_calls(x), _osrt_calls(x)
    finally:
        x.con.close()
    return _to_trace(r, ops, calls, osrt)


def _device_ops(x) -> list[tuple]:
    parts = []
    if x.has("CUPTI_ACTIVITY_KIND_KERNEL"):
        name = "COALESCE(o.demangledName, o.shortName)" if x.has("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName") \
            else "o.shortName"
        parts.append(_ops_sql("CUPTI_ACTIVITY_KIND_KERNEL", q.KERNEL, name, "NULL"))
    if x.has("CUPTI_ACTIVITY_KIND_MEMCPY"):
        parts.append(_ops_sql("CUPTI_ACTIVITY_KIND_MEMCPY", q.MEMCPY,
                              "(COALESCE(o.copyKind, 0) << 16) | (COALESCE(o.srcKind, 7) << 8) | COALESCE(o.dstKind, 7)",
                              "o.bytes"))
    if x.has("CUPTI_ACTIVITY_KIND_MEMSET"):
        mem = "COALESCE(o.memKind, 7)" if x.has("CUPTI_ACTIVITY_KIND_MEMSET", "memKind") else "7"
        parts.append(_ops_sql("CUPTI_ACTIVITY_KIND_MEMSET", q.MEMSET, mem, "o.bytes"))
    if not parts:
        return []
    return x.query(" UNION ALL ".join(parts) + " ORDER BY 5, 6")


def _ops_sql(table: str, kind: int, name: str, size: str) -> str:
    pid = q.OP_PID.replace("globalPid", "o.globalPid")
    return f"""SELECT {kind}, {pid}, o.deviceId, o.streamId, o.start, o.end, c.start, c.gtid, {name}, {size}
               FROM "{table}" AS o LEFT JOIN calls AS c ON c.pid = {pid} AND c.corr = o.correlationId
               WHERE o.start IS NOT NULL AND o.end IS NOT NULL"""


def _host_calls(x) -> list[tuple]:
    return x.query(f"SELECT start, end, gtid, nameId, cls = {q.DRIVER_CLASS} FROM calls ORDER BY start, end DESC")


def _osrt_calls(x) -> list[tuple]:
    if not x.has("OSRT_API"):
        return []
    return x.query("SELECT start, end, globalTid, nameId FROM OSRT_API WHERE start IS NOT NULL AND end IS NOT NULL "
                   "AND (globalTid & 16777215) != 0 ORDER BY start, end DESC")


def _to_trace(r: NsysRows, ops: list[tuple], calls: list[tuple], osrt: list[tuple]) -> Trace:
    steps = NvtxSteps(r.nvtx, r.step_annotation, r.path)
    host_lane = ThreadLanes(r.threads, {c[2] >> 24 & 0xFFFFFF for c in calls} | {n[2] >> 24 & 0xFFFFFF for n in r.nvtx})
    s = r.strings
    multi = len({o[1] for o in ops}) > 1
    lanes: dict[tuple, str] = {}
    devices: dict[str, str] = {}
    for kind, pid, dev, stream, *_ in ops:
        if (pid, dev, stream) not in lanes:
            device = f"pid {pid} gpu{dev}" if multi else f"gpu{dev}"
            lanes[(pid, dev, stream)] = f"{device} stream {stream}"
            devices[lanes[(pid, dev, stream)]] = device
    op_names = {}
    for kind, *_, key, _ in ops:
        if (kind, key) not in op_names:
            op_names[(kind, key)] = (s.get(key, f"kernel {key}") if kind == q.KERNEL else _copy_name(r, key)
                                     if kind == q.MEMCPY else f"Memset ({r.mem_kinds.get(key, key)})")
    launched = np.array([o[6] if o[6] is not None else o[4] for o in ops], dtype=np.int64)
    op_steps = steps.of_many(launched).tolist()
    device_spans = [DeviceSpan(lanes[(pid, dev, stream)], op_names[(kind, key)], st, 0, t0, t1, enq or 0)
                    for (kind, pid, dev, stream, t0, t1, enq, _, key, _), st in zip(ops, op_steps)]
    names = {i: base_name(v) for i, v in s.items()}

    def step_of(rows: list[tuple]) -> list[int]:
        return steps.of_many(np.fromiter((x[0] for x in rows), np.int64, len(rows))).tolist()

    host = [HostSpan(names[n], st, 0, t0, t1, host_lane(g)) for (t0, t1, g, n, _), st in zip(calls, step_of(calls))]
    host += [HostSpan(text, int(payload) if steps.engine and dom == ENGINE_DOMAIN and payload is not None
                      else st, 0, t0, t1, host_lane(g))
             for (t0, t1, g, text, dom, payload), st in zip(r.nvtx, step_of(r.nvtx))]
    host += [HostSpan(s.get(n, f"osrt {n}"), st, 0, t0, t1, host_lane(g)) for (t0, t1, g, n), st in zip(osrt, step_of(osrt))]
    host.sort(key=lambda h: (h.t0, -h.t1))
    sites = innermost_ranges(r.nvtx, [(w[2], w[0]) for w in r.waits], steps)
    waits = [_wait(r, w, site, st, steps) for w, site, st in zip(r.waits, sites, step_of(r.waits))]
    used = sorted({d.step for d in device_spans} | {h.step for h in host} | {w.step for w in waits})
    count = Counter(d.stream for d in device_spans)
    busy: Counter = Counter()
    for d in device_spans:
        busy[d.stream] += d.t1 - d.t0
    primary = min(count, key=lambda x: (-count[x], -busy[x], x)) if count else None
    header = {"primary_stream": primary, "stream_devices": devices,
              "host_phases": sorted(TOP_PHASES) if steps.engine else top_level_names(r.nvtx, steps),
              "categories": {"host": {**{base_name(s.get(n, "?")): "cuda driver" if drv else "cuda runtime"
                                         for _, _, _, n, drv in calls},
                                      **{t[3]: "nvtx" for t in r.nvtx},
                                      **{s.get(n, f"osrt {n}"): "os runtime" for _, _, _, n in osrt}},
                             "device": {name: KIND_NAMES[kind] for (kind, _), name in op_names.items()}},
              "kinds": dict(Counter(o[0] for o in ops)), "unlinked": sum(1 for o in ops if o[6] is None),
              "pids": sorted({o[1] for o in ops} | {c[2] >> 24 & 0xFFFFFF for c in calls}),
              "runtime_calls": len(calls), "osrt_calls": len(osrt), "host_spans": len(host)}
    return Trace(header, host, device_spans, waits, [StepRecord(x, IMPORTED_STEP, 0, 0, 0, 0, 0) for x in used], [])


def header_view(header: dict) -> dict:
    """The part of an importer's header the record path above makes, to compare with it."""
    src = header["source"]
    return {"primary_stream": header["primary_stream"], "stream_devices": header["stream_devices"],
            "host_phases": header["host_phases"], "categories": header["categories"],
            "kinds": {k: v for k, v in ((q.KERNEL, src["kernels"]), (q.MEMCPY, src["memcpys"]),
                                        (q.MEMSET, src["memsets"])) if v},
            "unlinked": src["unlinked"], "pids": sorted(int(p) for p in src["processes"]),
            "runtime_calls": src["runtime_calls"], "osrt_calls": src["osrt_calls"], "host_spans": src["host_spans"]}
