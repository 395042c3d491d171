"""A profiler trace's span events as columns: what the importer keeps of each, and no more.

``json.loads`` makes a dict of ~1 KB per event; the importer needs seven numbers of one. As
each block of events is decoded (``kineto_scan.py``) it is checked (every event, as before)
and what is used is appended to growing columns: the event's index, its kind, its name and
thread as codes into tables of the distinct ones, its start and end in ns, its correlation id
and, for a device op, its lane ("gpu0 stream 7") as a code. More of ``args`` is kept only for
the few events whose other fields a wait's reason reads (copies, ``cuda_sync`` records: the
fields ``KEPT_ARGS``) and for correlation ids that are not integers (the id). ``ac2g`` flows
are columns of their own.

The loop does per event only what needs the event (its checks, in file order, for the exact
messages; the codes); the times are kept as given and made ns a block at a time after it
(``kineto_ns.py``), and a category is looked up once for its code and what it needs.
"""
from __future__ import annotations

import math
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.trace.importers.kineto_ns import flow_ns, span_ns

# Kinds of event kept, by code; older Kineto spelled some categories capitalised.
KINDS = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver",
         "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")
CODE = {k: i for i, k in enumerate(KINDS)}
HOST_CATS = {"cpu_op": "cpu_op", "operator": "cpu_op", "user_annotation": "user_annotation",
             "python_function": "python_function", "cuda_runtime": "cuda_runtime",
             "runtime": "cuda_runtime", "cuda_driver": "cuda_driver", "driver": "cuda_driver"}
DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "gpu_memcpy", "memcpy": "gpu_memcpy",
               "gpu_memset": "gpu_memset", "memset": "gpu_memset"}
SYNC_CAT = "cuda_sync"
HOST_CODES = np.array([CODE[k] for k in ("cpu_op", "user_annotation", "python_function", "cuda_runtime",
                                          "cuda_driver")])
CALL_CODES = np.array([CODE["cuda_runtime"], CODE["cuda_driver"]])
DEVICE_CODES = np.array([CODE[k] for k in ("kernel", "gpu_memcpy", "gpu_memset")])
NESTING_CODES = np.array([CODE[k] for k in ("cpu_op", "user_annotation", "python_function")])
CATEGORY_KINDS = {**HOST_CATS, **DEVICE_CATS, SYNC_CAT: SYNC_CAT}
_DEVICE_KINDS = frozenset(DEVICE_CATS.values())
_KEEP_ARGS = frozenset({CODE["gpu_memcpy"], CODE[SYNC_CAT]})
KEPT_ARGS = ("correlation", "stream", "wait_on_stream", "cuda_sync_kind", "bytes")
"""What ``kineto.py`` reads of a copy's or ``cuda_sync`` record's args (its wait reasons), kept of them."""
_SPAN_FIELDS = itemgetter("name", "ts", "dur", "pid", "tid")   # one call for five look-ups
# category -> (kind code, a device op?, its args kept?): one look-up per span event
SPECS = {cat: (CODE[kind], kind in _DEVICE_KINDS, CODE[kind] in _KEEP_ARGS) for cat, kind in CATEGORY_KINDS.items()}

NONE = np.iinfo(np.int64).min        # no correlation id (absent or null)
ODD = NONE + 1                       # one that is not an int64: the value is in ``odd_corr``
INT64_RANGE = (-(2**63) + 2, 2**63)


class Event(NamedTuple):
    """One checked span event, built on demand from the columns (for messages and the few waits)."""
    index: int      # position in traceEvents
    kind: str       # canonical category (HOST_CATS / DEVICE_CATS values, or "cuda_sync")
    name: str
    pid: object
    tid: object
    t0: int         # ns
    t1: int
    args: dict


class EventTable:
    """The kept span events, one array per field, in file order."""

    FIELDS = ("index", "kind", "name", "thread", "t0", "t1", "corr", "lane")

    def __init__(self, arrays: dict[str, np.ndarray], names: list[str], threads: list[tuple], lanes: list[str],
                 args: dict[int, dict], odd_corr: dict[int, object]):
        self.arrays, self.names, self.threads, self.lanes = arrays, names, threads, lanes
        self.args, self.odd_corr = args, odd_corr      # both by event index

    def __len__(self) -> int:
        return len(self.arrays["index"])

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["arrays"][name]
        except KeyError:
            raise AttributeError(name) from None

    def take(self, index) -> EventTable:
        return EventTable({k: a[index] for k, a in self.arrays.items()}, self.names, self.threads, self.lanes,
                          self.args, self.odd_corr)

    def is_kind(self, codes: np.ndarray) -> np.ndarray:
        return np.isin(self.arrays["kind"], codes)

    def event(self, row: int) -> Event:
        a = self.arrays
        i = int(a["index"][row])
        pid, tid = self.threads[a["thread"][row]]
        args = self.args.get(i)
        if args is None:
            c = int(a["corr"][row])
            args = {} if c == NONE else {"correlation": self.odd_corr[i] if c == ODD else c}
        return Event(i, KINDS[a["kind"][row]], self.names[a["name"][row]], pid, tid, int(a["t0"][row]),
                     int(a["t1"][row]), args)

    def correlation(self, row: int):
        """Row ``row``'s correlation id as the trace gave it (None: none)."""
        c = int(self.arrays["corr"][row])
        return None if c == NONE else self.odd_corr[int(self.arrays["index"][row])] if c == ODD else c


class Flows(NamedTuple):
    """``ac2g`` flow starts (ph "s") or ends (ph "f"): id, thread code, time in ns; ids not int64 in ``odd``."""
    id: np.ndarray
    thread: np.ndarray
    ns: np.ndarray
    odd: dict          # row -> id


def _finite(v: object) -> bool:
    t = type(v)
    return t is int or (t is float and math.isfinite(v))


def code_of(table: dict, key) -> int:
    try:
        return table.setdefault(key, len(table))
    except TypeError:              # an unhashable pid or tid (a list): by its text
        return table.setdefault(repr(key), len(table))


def _corr(v) -> int:
    if type(v) is int and INT64_RANGE[0] <= v < INT64_RANGE[1]:
        return v
    return NONE if v is None else ODD


class EventBuilder:
    """Checks events a block at a time (``add``) and keeps the span events' columns (``finish``).

    What is wrong is reported to ``problems`` (``kineto_read.Problems``), naming the event."""

    def __init__(self, problems):
        self.problems = problems
        self.n = 0                       # events seen (the next one's index)
        self.fine = False                # any time with sub-µs digits
        self.ignored: dict[str, int] = {}
        self.thread_names: dict = {}
        self.names: dict[str, int] = {}
        self.threads: dict = {}          # (pid, tid) -> code (unhashable ones by their repr)
        self.thread_list: list[tuple] = []   # code -> (pid, tid)
        self.lanes: dict[str, int] = {}
        self._lane_of: dict = {}         # (device, stream) -> lane code
        self.args: dict[int, dict] = {}
        self.odd_corr: dict[int, object] = {}
        self.wide: dict[int, tuple[int, int]] = {}   # row -> (t0, t1) beyond int64 (implausible, reported later)
        self._cols: dict[str, list[np.ndarray]] = {k: [] for k in EventTable.FIELDS}
        self._rows = 0
        self._flows = {"s": ([], [], [], {}), "f": ([], [], [], {})}
        self._flow_rows = {"s": 0, "f": 0}
        self._specs = dict(SPECS)       # grows with the spellings seen (Kernel, Runtime, ...), each looked up once

    def add(self, raw: list) -> None:
        """Check every event of ``raw`` (the next events of traceEvents); keep the span events we use
        (the hot loop of an import: what can be done a column at a time, the times, is done after)."""
        problems, specs, ignored, names = self.problems, self._specs, self.ignored, self.names
        thread_codes, isfinite, lo, hi, fields = self.threads, math.isfinite, INT64_RANGE[0], INT64_RANGE[1], _SPAN_FIELDS
        idx, kd, nm, th, tss, durs, cor, ln = [], [], [], [], [], [], [], []
        flows = {"s": ([], [], [], []), "f": ([], [], [], [])}
        i = self.n - 1
        for e in raw:
            i += 1
            if type(e) is not dict:
                problems.report("not an object", f"event {i} is a {type(e).__name__}, not an object")
                continue
            ph = e.get("ph")
            if ph == "X":
                cat = e.get("cat")
                spec = specs.get(cat) if type(cat) is str else None
                if spec is None:
                    if type(cat) is str and cat.lower() in CATEGORY_KINDS:
                        spec = specs[cat] = SPECS[CATEGORY_KINDS[cat.lower()]]
                    else:
                        ignored[str(cat)] = ignored.get(str(cat), 0) + 1
                        continue
                code, on_device, keep_args = spec
                try:
                    name, ts, dur, pid, tid = fields(e)
                except KeyError:               # one is missing: reported below
                    name, ts, dur, pid, tid = e.get("name"), e.get("ts"), e.get("dur"), e.get("pid"), e.get("tid")
                tt, td = type(ts), type(dur)
                if type(name) is not str or pid is None or tid is None \
                        or not (tt is float and isfinite(ts) or tt is int) \
                        or not (td is float and isfinite(dur) or td is int) or dur < 0:
                    _bad_span(i, e, cat, problems)
                    continue
                args = e.get("args")
                if type(args) is not dict:
                    args = {}
                lane = -1
                if on_device:
                    stream = args.get("stream", tid)
                    if type(stream) is not int:
                        problems.report("no stream", f"event {i} ({cat} {name[:60]!r}): a device op without an "
                                                     f"integer stream (args.stream or tid), got {stream!r}")
                        continue
                    device = args.get("device", pid)
                    lane = self._lane_of.get((device, stream)) if type(device) is int else None
                    if lane is None:
                        lane = self._lane(device, stream)
                idx.append(i)
                kd.append(code)
                nm.append(names.setdefault(name, len(names)))
                try:
                    th.append(thread_codes[(pid, tid)])
                except (KeyError, TypeError):      # a new thread, or an unhashable pid/tid
                    th.append(self._thread(pid, tid))
                tss.append(ts)
                durs.append(dur)
                c = args.get("correlation")
                if type(c) is not int or not lo <= c < hi:
                    c = _corr(c)
                    if c == ODD:
                        self.odd_corr[i] = args["correlation"]
                cor.append(c)
                ln.append(lane)
                if keep_args:
                    self.args[i] = {k: args[k] for k in KEPT_ARGS if k in args}
            elif ph == "M":
                if e.get("name") == "thread_name" and isinstance(e.get("args"), dict):
                    try:
                        self.thread_names[(e.get("pid"), e.get("tid"))] = str(e["args"].get("name", ""))
                    except TypeError:   # a list pid or tid: it names no thread (kineto.py looks up hashable pairs)
                        pass
            elif (ph == "s" or ph == "f") and e.get("cat") == "ac2g":
                ts = e.get("ts")
                tt = type(ts)
                if (tt is float and isfinite(ts) or tt is int) and "id" in e:
                    ids, thr, ns, odd = flows[ph]
                    fid = e["id"]
                    if not (type(fid) is int and lo <= fid < hi):
                        odd.append((len(ids), fid))
                        fid = ODD
                    ids.append(fid)
                    pid, tid = e.get("pid"), e.get("tid")
                    try:
                        thr.append(thread_codes[(pid, tid)])
                    except (KeyError, TypeError):
                        thr.append(self._thread(pid, tid))
                    ns.append(ts)          # µs: made ns a column at a time, below
        self.commit(i + 1, (idx, kd, nm, th, tss, durs, cor, ln), flows)

    def commit(self, n: int, spans: tuple, flows: dict) -> None:
        """Append a block's kept spans (lists: index, kind, name, thread, ts, dur, correlation,
        lane) and flows; ``n``: the events seen so far."""
        idx, kd, nm, th, tss, durs, cor, ln = spans
        self.n = n
        t0s, t1s, fine = span_ns(tss, durs)
        self.fine = self.fine or fine
        self._append(idx, kd, nm, th, t0s, t1s, cor, ln)
        for ph, (ids, thr, ns, odd) in flows.items():
            cols = self._flows[ph]
            base = self._flow_rows[ph]
            cols[0].append(np.array(ids, dtype=np.int64))
            cols[1].append(np.array(thr, dtype=np.int32))
            ns = flow_ns(ns)
            cols[2].append(ns if isinstance(ns, np.ndarray) else _int64(ns, None, base))
            cols[3].update((base + r, v) for r, v in odd)
            self._flow_rows[ph] += len(ids)

    def _lane(self, device, stream: int) -> int:
        """The lane code of ``device``'s ``stream``, new or not; remembered by (device, stream)
        where the device is an int (the hot loops look there first, inline)."""
        lane = code_of(self.lanes, f"gpu{device} stream {stream}")
        if type(device) is int:
            self._lane_of[(device, stream)] = lane
        return lane

    def _thread(self, pid, tid) -> int:
        key = (pid, tid)
        try:
            code = self.threads.get(key)
        except TypeError:              # an unhashable pid or tid (a list): by its text
            key = repr(key)
            code = self.threads.get(key)
        if code is None:
            code = self.threads[key] = len(self.thread_list)
            self.thread_list.append((pid, tid))
        return code

    def _append(self, idx, kd, nm, th, t0s, t1s, cor, ln) -> None:
        c = self._cols
        c["index"].append(np.array(idx, dtype=np.int64))
        c["kind"].append(np.array(kd, dtype=np.int8))
        c["name"].append(np.array(nm, dtype=np.int32))
        c["thread"].append(np.array(th, dtype=np.int32))
        c["corr"].append(np.array(cor, dtype=np.int64))
        c["lane"].append(np.array(ln, dtype=np.int32))
        wide: dict[int, int] = {}
        c["t0"].append(t0s if isinstance(t0s, np.ndarray) else _int64(t0s, wide, self._rows))
        c["t1"].append(t1s if isinstance(t1s, np.ndarray) else _int64(t1s, wide, self._rows))
        for row in wide:
            self.wide[row] = (t0s[row - self._rows], t1s[row - self._rows])
        self._rows += len(idx)

    def finish(self) -> tuple[EventTable, Flows, Flows]:
        arrays = {k: np.concatenate(v) if v else np.empty(0, dtype=np.int64) for k, v in self._cols.items()}
        table = EventTable(arrays, list(self.names), self.thread_list, list(self.lanes), self.args, self.odd_corr)
        flows = []
        for ph in ("s", "f"):
            ids, thr, ns, odd = self._flows[ph]
            flows.append(Flows(np.concatenate(ids) if ids else np.empty(0, dtype=np.int64),
                               np.concatenate(thr) if thr else np.empty(0, dtype=np.int32),
                               np.concatenate(ns) if ns else np.empty(0, dtype=np.int64), odd))
        self._cols = {}
        return table, flows[0], flows[1]


def _int64(values: list[int], wide: dict | None, base: int) -> np.ndarray:
    """``values`` as int64; one beyond int64 (an implausible time) is clipped, its row noted in ``wide``."""
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        out = np.empty(len(values), dtype=np.int64)
        for r, v in enumerate(values):
            if -(2**63) <= v < 2**63:
                out[r] = v
            else:
                out[r] = -(2**63) if v < 0 else 2**63 - 1
                if wide is not None:
                    wide[base + r] = v
        return out


def _bad_span(i: int, e: dict, cat: str, problems) -> None:
    """Report what is wrong with span event ``e`` (the slow path: only for invalid events)."""
    label = f"event {i} ({cat} {str(e.get('name'))[:60]!r})"
    missing = [k for k in ("name", "ts", "dur", "pid", "tid") if e.get(k) is None]
    if missing:
        problems.report("missing fields", f"{label}: missing {', '.join(repr(m) for m in missing)}")
    elif type(e["name"]) is not str:
        problems.report("bad field", f"{label}: 'name' is {e['name']!r}, not a string")
    elif not _finite(e["ts"]) or not _finite(e["dur"]):
        bad = "ts" if not _finite(e["ts"]) else "dur"
        problems.report("bad field", f"{label}: {bad!r} is {e[bad]!r}, not a finite number")
    else:
        problems.report("negative duration", f"{label}: negative duration {e['dur']} µs")
