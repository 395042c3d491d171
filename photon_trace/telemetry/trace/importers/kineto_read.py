"""Reading a PyTorch profiler (Kineto) trace: bytes, JSON and every event checked.

A Kineto trace is Chrome trace-event JSON, often gzipped::

    {"schemaVersion": 1, "deviceProperties": [...], "baseTimeNanoseconds": ...,
     "traceEvents": [{"ph": "X", "cat": "kernel", "name": ..., "pid": 0, "tid": 7,
                      "ts": 1707417525512145, "dur": 1, "args": {"stream": 7, "correlation": 1482}}, ...]}

``ts`` and ``dur`` are always microseconds (``displayTimeUnit`` only tells a viewer how
to label them); newer traces give them as floats with three decimals (ns resolution)
relative to ``baseTimeNanoseconds``, older ones as integer µs since the epoch. Here they
become integer nanoseconds, and the source's resolution is kept.

What is wrong is reported by ``KinetoFormatError`` naming the problem and, for an event,
its index in ``traceEvents``. ``strict=False`` instead skips what is invalid (a truncated
file is read up to its last complete event; invalid events are dropped) and warns once
per kind of problem with ``KinetoPartialWarning``; the problems are also returned.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from photon_trace.telemetry.trace.file import TraceFormatError, TraceTruncatedWarning
from photon_trace.telemetry.trace.plausible import RULE, implausible

SCHEMA_VERSION = 1
"""The newest Kineto ``schemaVersion`` this reader knows (PyTorch 1.8 to 2.x write 1)."""

# Event categories, by what they become; older Kineto spelled some capitalised.
HOST_CATS = {"cpu_op": "cpu_op", "operator": "cpu_op", "user_annotation": "user_annotation",
             "python_function": "python_function", "cuda_runtime": "cuda_runtime",
             "runtime": "cuda_runtime", "cuda_driver": "cuda_driver", "driver": "cuda_driver"}
DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "gpu_memcpy", "memcpy": "gpu_memcpy",
               "gpu_memset": "gpu_memset", "memset": "gpu_memset"}
SYNC_CAT = "cuda_sync"

class KinetoFormatError(TraceFormatError):
    """Not a Kineto trace, or one with an invalid event (the message names it)."""


class KinetoPartialWarning(UserWarning):
    """Part of the trace was invalid and skipped (``strict=False``); the rest was imported."""


class Event(NamedTuple):
    """One checked span event (``ph`` "X") of a category this importer uses."""
    index: int      # position in traceEvents
    kind: str       # canonical category (HOST_CATS / DEVICE_CATS values, or "cuda_sync")
    name: str
    pid: object
    tid: object
    t0: int         # ns
    t1: int
    args: dict


@dataclass
class KinetoDoc:
    """A checked trace: its metadata, its span events in file order, flows and thread names."""
    path: str
    meta: dict                       # every top-level key but traceEvents
    events: list[Event]
    flows_start: dict = field(default_factory=dict)   # ac2g id -> (pid, tid, ns)
    flows_end: dict = field(default_factory=dict)     # (pid, tid, ns) -> ac2g id
    thread_names: dict = field(default_factory=dict)  # (pid, tid) -> name
    resolution_ns: int = 1000
    n_events: int = 0
    ignored: dict = field(default_factory=dict)       # category -> count of events not used
    problems: dict = field(default_factory=dict)      # kind -> [count, first message]
    truncated: bool = False


class Problems:
    """What is wrong with a trace: raised at once (``strict``), else counted per kind with the first message."""

    def __init__(self, path: str, strict: bool):
        self.path, self.strict, self.seen = path, strict, {}

    def report(self, kind: str, message: str) -> None:
        if self.strict:
            raise KinetoFormatError(f"{self.path}: {message}")
        entry = self.seen.setdefault(kind, [0, message])
        entry[0] += 1


def _decompress(path: Path, raw: bytes) -> tuple[bytes, bool]:
    """Plain bytes, and whether a gzip stream was cut short."""
    if not raw.startswith(b"\x1f\x8b"):
        return raw, False
    import zlib
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(raw)
    except zlib.error as e:
        raise KinetoFormatError(f"{path}: a corrupt gzip stream ({e})") from None
    return out, not d.eof


def _salvage(text: str) -> tuple[dict, list, int]:
    """Metadata and the complete events of a JSON document cut short, and where it was cut."""
    key = text.find('"traceEvents"')
    if key < 0:
        return {}, [], 0
    meta: dict = {}
    head = text[:key].rstrip().rstrip(",") + "}"
    try:
        meta = json.loads(head)
    except ValueError:
        pass
    pos = text.find("[", key)
    events: list = []
    if pos < 0:
        return meta, events, key
    dec = json.JSONDecoder()
    pos += 1
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        try:
            obj, pos = dec.raw_decode(text, pos)
        except ValueError:
            return meta, events, pos
        events.append(obj)


def _ns(v: float) -> int:
    return v * 1000 if isinstance(v, int) else round(v * 1000)


def read_kineto(path: str | Path, data: bytes | None = None, *, strict: bool = True) -> KinetoDoc:
    """Read and check the Kineto trace at ``path`` (``data``: its bytes, when already read)."""
    path = Path(path)
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise KinetoFormatError(f"{path}: cannot read: {e.strerror or e}") from None
    data, cut = _decompress(path, data)
    text = data.decode("utf-8", errors="replace")
    problems = Problems(str(path), strict)
    truncated = False
    try:
        doc = json.loads(text)
    except RecursionError:
        raise KinetoFormatError(f"{path}: not a trace: JSON nested too deeply to read") from None
    except ValueError as e:
        at_end = getattr(e, "pos", 0) >= len(text.rstrip())   # the parser ran out of text
        if not (cut or at_end):
            raise KinetoFormatError(f"{path}: not JSON ({e})") from None
        meta, raw_events, where = _salvage(text)
        what = "the gzip stream is cut short" if cut else "the JSON ends mid-way"
        if not raw_events:
            raise KinetoFormatError(f"{path}: truncated: {what} before any complete event") from None
        if strict:
            raise KinetoFormatError(
                f"{path}: truncated: {what} (after {len(raw_events)} complete events, at byte {where}); "
                f"--allow-partial imports those") from None
        warnings.warn(f"{path}: truncated: {what}; imported the {len(raw_events)} complete events before the cut",
                      TraceTruncatedWarning, stacklevel=2)
        doc = {**meta, "traceEvents": raw_events}
        truncated = True
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        keys = sorted(doc)[:6] if isinstance(doc, dict) else type(doc).__name__
        raise KinetoFormatError(f"{path}: JSON, but not a trace: no 'traceEvents' list (found {keys})")
    other = doc.get("otherData")
    if isinstance(other, dict) and other.get("format") == "photon_trace":
        raise KinetoFormatError(f"{path}: this is photon_trace's own Perfetto export; "
                                f"load the .trace.jsonl it was made from")
    version = doc.get("schemaVersion", SCHEMA_VERSION)
    if isinstance(version, bool) or not isinstance(version, int):
        raise KinetoFormatError(f"{path}: schemaVersion should be an integer, got {version!r}")
    if version > SCHEMA_VERSION:
        raise KinetoFormatError(f"{path}: Kineto schema version {version} is newer than this importer "
                                f"reads ({SCHEMA_VERSION}); upgrade photon_trace")
    out = KinetoDoc(str(path), {k: v for k, v in doc.items() if k != "traceEvents"}, [],
                    truncated=truncated, n_events=len(doc["traceEvents"]))
    _read_events(doc["traceEvents"], out, problems)
    _check_times(out, problems)
    out.problems = problems.seen
    if not any(e.kind in HOST_CATS.values() or e.kind in DEVICE_CATS.values() for e in out.events):
        if not out.problems:
            raise KinetoFormatError(
                f"{path}: a Chrome trace-event file, but not one from the PyTorch profiler "
                f"(no cpu_op, user_annotation, cuda_runtime or kernel events among {out.n_events})")
    for kind, (count, first) in out.problems.items():
        warnings.warn(f"{path}: skipped {count} event{'s' if count > 1 else ''} ({kind}); first: {first}",
                      KinetoPartialWarning, stacklevel=2)
    return out


_KINDS = {**HOST_CATS, **DEVICE_CATS, SYNC_CAT: SYNC_CAT}
_DEVICE_KINDS = frozenset(DEVICE_CATS.values())


def _finite(v: object) -> bool:
    t = type(v)
    return t is int or (t is float and math.isfinite(v))


def _read_events(raw: list, out: KinetoDoc, problems: Problems) -> None:
    """Check every event; keep the span events of the categories we use (the hot loop of an import)."""
    fine = False
    ignored: dict[str, int] = {}
    events = out.events
    kinds = dict(_KINDS)      # grows with the spellings seen (Kernel, Runtime, ...), each looked up once
    for i, e in enumerate(raw):
        if type(e) is not dict:
            problems.report("not an object", f"event {i} is a {type(e).__name__}, not an object")
            continue
        ph = e.get("ph")
        cat = e.get("cat")
        if ph == "X":
            kind = kinds.get(cat) if type(cat) is str else None
            if kind is None:
                if type(cat) is str and cat.lower() in _KINDS:
                    kind = kinds[cat] = _KINDS[cat.lower()]
                else:
                    ignored[str(cat)] = ignored.get(str(cat), 0) + 1
                    continue
            name, ts, dur, pid, tid = e.get("name"), e.get("ts"), e.get("dur"), e.get("pid"), e.get("tid")
            if type(name) is not str or not _finite(ts) or not _finite(dur) or pid is None or tid is None \
                    or dur < 0:
                _bad_span(i, e, cat, problems)
                continue
            args = e.get("args")
            if type(args) is not dict:
                args = {}
            if kind in _DEVICE_KINDS and type(args.get("stream", tid)) is not int:
                problems.report("no stream", f"event {i} ({cat} {name[:60]!r}): a device op without an integer "
                                             f"stream (args.stream or tid), got {args.get('stream', tid)!r}")
                continue
            if not fine and ((type(ts) is float and not ts.is_integer()) or (type(dur) is float and not dur.is_integer())):
                fine = True
            t0 = ts * 1000 if type(ts) is int else round(ts * 1000)
            events.append(Event(i, kind, name, pid, tid, t0, t0 + (dur * 1000 if type(dur) is int else round(dur * 1000)),
                                args))
        elif ph == "M":
            if e.get("name") == "thread_name" and isinstance(e.get("args"), dict):
                out.thread_names[(e.get("pid"), e.get("tid"))] = str(e["args"].get("name", ""))
        elif (ph == "s" or ph == "f") and cat == "ac2g":
            ts = e.get("ts")
            if _finite(ts) and "id" in e:
                where = (e.get("pid"), e.get("tid"), _ns(ts))
                if ph == "s":
                    out.flows_start[e["id"]] = where
                else:
                    out.flows_end[where] = e["id"]
    out.resolution_ns = 1 if fine else 1000
    out.ignored = ignored


def _check_times(out: KinetoDoc, problems: Problems) -> None:
    """Impossible times (``plausible.py``: past 2**63 ns, or days from the rest) are bad input
    naming the event; with ``strict=False`` those events are skipped."""
    events = out.events
    bad = implausible([e.t0 for e in events], [e.t1 for e in events], first_only=problems.strict)
    for i, problem in bad:
        e = events[i]
        problems.report("implausible time", f"event {e.index} ({e.kind} {e.name[:60]!r}): {problem} ({RULE})")
    if bad:
        drop = {i for i, _ in bad}
        out.events = [e for i, e in enumerate(events) if i not in drop]


def _bad_span(i: int, e: dict, cat: str, problems: Problems) -> None:
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
