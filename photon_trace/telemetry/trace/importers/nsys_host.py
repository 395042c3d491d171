"""An Nsight Systems export's host spans as ``Columns``: runtime and driver calls, NVTX ranges and
OS runtime calls on one lane per thread, made by array operations (``nsys.py`` makes the rest).

The calls come as arrays (``nsys_arrays``), the NVTX ranges as tuples (a few per step). Their names
become codes into one table (a call by its function, ``_v3020`` suffixes dropped), their threads
lane names, and all three are put in one order, by start and longest first, by one ``lexsort``
(stable: ties keep calls, then ranges, then OS calls, as the record path's sort did).
"""
from __future__ import annotations

import re

import numpy as np

from photon_trace.telemetry.trace.columns import Columns, encode
from photon_trace.telemetry.trace.importers import nsys_arrays as a
from photon_trace.telemetry.trace.importers.nsys_arrays import HostArrays
from photon_trace.telemetry.trace.importers.nsys_steps import ENGINE_DOMAIN, NvtxSteps
from photon_trace.telemetry.trace.records import HostSpan

_VERSION_SUFFIX = re.compile(r"_v\d+$")


def base_name(api: str) -> str:
    """``cudaMemcpy_v3020`` -> ``cudaMemcpy``: the function as the program calls it."""
    return _VERSION_SUFFIX.sub("", api)


class ThreadLanes:
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


def host_columns(calls: HostArrays, osrt: HostArrays, nvtx: list[tuple], s: dict[int, str],
                 threads: dict[int, str], steps: NvtxSteps) -> tuple[Columns, dict[str, str]]:
    """Runtime and driver calls, NVTX ranges (our engine's phases with their step) and OS runtime
    calls as one ``Columns`` of host spans by (start, longest first); and their categories."""
    nv = len(nvtx)
    nv_t0, nv_t1, nv_gtid = (np.fromiter((x[i] for x in nvtx), np.int64, nv) for i in range(3))
    nv_step = steps.of_many(nv_t0)
    if steps.engine:    # our engine's phases carry their step as the payload
        nv_step = np.array([int(p) if d == ENGINE_DOMAIN and p is not None else st
                            for (*_, d, p), st in zip(nvtx, nv_step.tolist())], dtype=np.int64)
    nv_code, nv_table = encode(x[3] for x in nvtx)
    call_ids, call_code = a.distinct_codes(calls.name_id)
    osrt_ids, osrt_code = a.distinct_codes(osrt.name_id)
    table = ([base_name(s.get(i, "?")) for i in call_ids.tolist()] + nv_table
             + [s.get(i, f"osrt {i}") for i in osrt_ids.tolist()])
    phase = np.concatenate([call_code, nv_code + len(call_ids), osrt_code + len(call_ids) + len(nv_table)])
    t0 = np.concatenate([calls.t0, nv_t0, osrt.t0])
    t1 = np.concatenate([calls.t1, nv_t1, osrt.t1])
    gtids, thread = a.distinct_codes(np.concatenate([calls.gtid, nv_gtid, osrt.gtid]))
    lane_of = np.zeros(len(gtids), dtype=bool)     # a host lane's process is named where calls or NVTX are in several
    lane_of[thread[:len(calls) + nv]] = True
    host_lane = ThreadLanes(threads, set((gtids[lane_of] >> 24 & 0xFFFFFF).tolist()))
    step = np.concatenate([steps.of_many(calls.t0), nv_step, steps.of_many(osrt.t0)])
    order = np.lexsort((-t1, t0))
    phase, phases = a.first_use(phase[order], table)
    thread, threads = a.first_use(thread[order], [host_lane(g) for g in gtids.tolist()])
    n = len(order)
    host = Columns(HostSpan, {"phase": phase, "step": step[order], "slot": np.zeros(n, dtype=np.int64),
                              "t0": t0[order], "t1": t1[order], "thread": thread,
                              "cpu_ns": np.full(n, -1, dtype=np.int64), "runq_ns": np.full(n, -1, dtype=np.int64)},
                   {"phase": phases, "thread": threads})
    # Categories as a dict built in call order makes them: names by first call, the kind of the last.
    is_call = np.flatnonzero(order < len(calls))
    code, driver = phase[is_call], calls.driver[order[is_call]]
    first = np.full(len(phases), len(is_call), dtype=np.int64)
    last = np.full(len(phases), -1, dtype=np.int64)
    np.minimum.at(first, code, np.arange(len(code)))
    np.maximum.at(last, code, np.arange(len(code)))
    called = [c for c in np.argsort(first, kind="stable").tolist() if last[c] >= 0]
    categories = {phases[c]: "cuda driver" if driver[last[c]] else "cuda runtime" for c in called}
    categories.update({x[3]: "nvtx" for x in nvtx})
    _, osrt_first = a.first_use(osrt_code, [table[len(call_ids) + len(nv_table) + i] for i in range(len(osrt_ids))])
    categories.update({name: "os runtime" for name in osrt_first})
    return host, categories
