"""Reading a PyTorch profiler (Kineto) trace: bytes, JSON and every event checked, as columns.

A Kineto trace is Chrome trace-event JSON, often gzipped::

    {"schemaVersion": 1, "deviceProperties": [...], "baseTimeNanoseconds": ...,
     "traceEvents": [{"ph": "X", "cat": "kernel", "name": ..., "pid": 0, "tid": 7,
                      "ts": 1707417525512145, "dur": 1, "args": {"stream": 7, "correlation": 1482}}, ...]}

``ts`` and ``dur`` are always microseconds (``displayTimeUnit`` only tells a viewer how
to label them); newer traces give them as floats with three decimals (ns resolution)
relative to ``baseTimeNanoseconds``, older ones as integer µs since the epoch. Here they
become integer nanoseconds, and the source's resolution is kept.

The document is read as a stream (``kineto_scan.py``: a block of events at a time, never the
whole as Python objects) into columns (``kineto_events.py``: what the importer uses of each
event); one of a few blocks is decoded whole instead (``kineto_small.py``: the same events,
without the stream's scan for where each block ends). A document the stream cannot follow, or one cut short, is parsed whole when it is
small (< ``WHOLE_MAX`` bytes on disk), so every message about a damaged file is the one the
whole-document parse gives; a large one gets the stream's account of it.

What is wrong is reported by ``KinetoFormatError`` naming the problem and, for an event,
its index in ``traceEvents``. ``strict=False`` instead skips what is invalid (a truncated
file is read up to its last complete event; invalid events are dropped) and warns once
per kind of problem with ``KinetoPartialWarning``; the problems are also returned.
"""
from __future__ import annotations

import json
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from photon_trace.telemetry.trace.file import TraceFormatError, TraceTruncatedWarning
from photon_trace.telemetry.trace.fit import check_fits
from photon_trace.telemetry.trace.importers.kineto_events import (
    DEVICE_CODES, HOST_CODES, EventBuilder, EventTable, Flows)
from photon_trace.telemetry.trace.importers.kineto_scan import CorruptGzip, Source, Stream, Unstreamable
from photon_trace.telemetry.trace.importers.kineto_small import small_document
from photon_trace.telemetry.trace.importers.kineto_times import implausible_rows
from photon_trace.telemetry.trace.importers.kineto_typed import add_block
from photon_trace.telemetry.trace.plausible import RULE
from photon_trace.telemetry.trace.rows import gc_paused

SCHEMA_VERSION = 1
"""The newest Kineto ``schemaVersion`` this reader knows (PyTorch 1.8 to 2.x write 1)."""
WHOLE_MAX = 16 << 20
"""Files up to this size (bytes on disk) that the stream cannot follow are parsed whole, for the
standard library's exact account of what is wrong (~10x that in memory while it runs)."""


class KinetoFormatError(TraceFormatError):
    """Not a Kineto trace, or one with an invalid event (the message names it)."""


class KinetoPartialWarning(UserWarning):
    """Part of the trace was invalid and skipped (``strict=False``); the rest was imported."""


@dataclass
class KinetoDoc:
    """A checked trace: its metadata, its span events in file order (columns), flows and thread names."""
    path: str
    meta: dict                       # every top-level key but traceEvents
    events: EventTable
    flows_start: Flows               # ac2g "s": id, thread code (events.threads), ns
    flows_end: Flows                 # ac2g "f"
    thread_names: dict = field(default_factory=dict)  # (pid, tid) -> name
    resolution_ns: int = 1000
    n_events: int = 0
    ignored: dict = field(default_factory=dict)       # category -> count of events not used
    problems: dict = field(default_factory=dict)      # kind -> [count, first message]
    truncated: bool = False


class Problems:
    """What is wrong with a trace: raised at once (``strict``), else counted per kind with the first
    message. ``defer``: a strict one is kept (``first``) for ``raise_first`` instead: a streamed
    trace's metadata after its events is checked before any event's problem is raised."""

    def __init__(self, path: str, strict: bool, defer: bool = False):
        self.path, self.strict, self.defer, self.seen = path, strict, defer, {}
        self.first: str | None = None

    def report(self, kind: str, message: str) -> None:
        if self.strict and not self.defer:
            raise KinetoFormatError(f"{self.path}: {message}")
        if self.first is None:
            self.first = message
        entry = self.seen.setdefault(kind, [0, message])
        entry[0] += 1

    def raise_first(self) -> None:
        if self.strict and self.first is not None:
            raise KinetoFormatError(f"{self.path}: {self.first}")


class _Whole(Exception):
    """Parse the document whole instead (it is small, and the stream could not follow it)."""


def read_kineto(path: str | Path, data: bytes | None = None, *, strict: bool = True) -> KinetoDoc:
    """Read and check the Kineto trace at ``path`` (``data``: its bytes, when already read)."""
    path = Path(path)
    try:
        size = len(data) if data is not None else path.stat().st_size
        if data is None:
            open(path, "rb").close()
    except OSError as e:
        raise KinetoFormatError(f"{path}: cannot read: {e.strerror or e}") from None
    if data is None:
        check_fits(path, "kineto")     # refused up front when it cannot fit in memory
    problems = Problems(str(path), strict, defer=True)
    builder = EventBuilder(problems)
    # The events are ~100k dicts made and freed, none in a cycle: no collection need look at them
    # (0.01-0.05 s of a 40k-event import was the collector's).
    with gc_paused():
        small = small_document(path, data, size)
        try:
            if small is not None:     # decoded whole: what the stream would read, without its scan
                meta, events = small
                del small
                n_events, truncated = len(events), False
                if events:
                    add_block(builder, events)
                del events
            else:
                stream = _streamed(path, builder, size, Source(path, data))
                meta, truncated, n_events = stream.meta, stream.truncated, stream.n_events
                if truncated:
                    _truncated(path, stream.source.cut, n_events, stream.where, strict)
        except _Whole:
            problems = Problems(str(path), strict, defer=True)
            builder = EventBuilder(problems)
            meta, events, truncated = _whole(path, data, strict)
            n_events = len(events)
            _check_meta(path, meta)
            builder.add(events)
            del events
        else:
            _check_meta(path, meta)
    problems.raise_first()
    table, starts, ends = builder.finish()
    table = _check_times(table, builder.wide, problems)
    out = KinetoDoc(str(path), meta, table, starts, ends, builder.thread_names, 1 if builder.fine else 1000,
                    n_events, builder.ignored, problems.seen, truncated)
    if not np.isin(table.kind, np.concatenate([HOST_CODES, DEVICE_CODES])).any() and not out.problems:
        raise KinetoFormatError(
            f"{path}: a Chrome trace-event file, but not one from the PyTorch profiler "
            f"(no cpu_op, user_annotation, cuda_runtime or kernel events among {out.n_events})")
    for kind, (count, first) in out.problems.items():
        warnings.warn(f"{path}: skipped {count} event{'s' if count > 1 else ''} ({kind}); first: {first}",
                      KinetoPartialWarning, stacklevel=2)
    return out


def _streamed(path: Path, builder: EventBuilder, size: int, source: Source) -> Stream:
    """The document read as a stream into ``builder`` (the stream read: its metadata, events,
    whether truncated); ``_Whole`` when it is small and the stream could not follow it or it
    was cut short."""
    stream = Stream(source)
    try:
        for block in stream.blocks():
            add_block(builder, block)
            del block             # not held while the next block is decoded
    except CorruptGzip as e:
        raise KinetoFormatError(f"{path}: a corrupt gzip stream ({e})") from None
    except Unstreamable as e:
        if size > WHOLE_MAX:
            raise KinetoFormatError(f"{path}: not JSON, or not a trace this reader can stream ({e})") from None
        raise _Whole from None
    if stream.truncated and size <= WHOLE_MAX:
        raise _Whole
    return stream


def _truncated(path: Path, cut: bool, complete: int, where: int, strict: bool) -> None:
    what = "the gzip stream is cut short" if cut else "the JSON ends mid-way"
    if not complete:
        raise KinetoFormatError(f"{path}: truncated: {what} before any complete event")
    if strict:
        raise KinetoFormatError(f"{path}: truncated: {what} (after {complete} complete events, at byte {where}); "
                                f"--allow-partial imports those")
    warnings.warn(f"{path}: truncated: {what}; imported the {complete} complete events before the cut",
                  TraceTruncatedWarning, stacklevel=3)


def _check_meta(path: Path, meta: dict) -> None:
    other = meta.get("otherData")
    if isinstance(other, dict) and other.get("format") == "photon_trace":
        raise KinetoFormatError(f"{path}: this is photon_trace's own Perfetto export; "
                                f"load the .trace.jsonl it was made from")
    version = meta.get("schemaVersion", SCHEMA_VERSION)
    if isinstance(version, bool) or not isinstance(version, int):
        raise KinetoFormatError(f"{path}: schemaVersion should be an integer, got {version!r}")
    if version > SCHEMA_VERSION:
        raise KinetoFormatError(f"{path}: Kineto schema version {version} is newer than this importer "
                                f"reads ({SCHEMA_VERSION}); upgrade photon_trace")


def _check_times(table: EventTable, wide: dict, problems: Problems) -> EventTable:
    """Impossible times (``plausible.py``: past 2**63 ns, or days from the rest) are bad input
    naming the event; with ``strict=False`` those events are skipped."""
    bad = implausible_rows(table.t0, table.t1, wide, first_only=problems.strict)
    for row, problem in bad:
        e = table.event(row)
        problems.report("implausible time", f"event {e.index} ({e.kind} {e.name[:60]!r}): {problem} ({RULE})")
    problems.raise_first()
    if not bad:
        return table
    keep = np.ones(len(table), dtype=bool)
    keep[[row for row, _ in bad]] = False
    return table.take(keep)


# -- the whole document at once: small files the stream could not follow ----------------------
def _whole(path: Path, data: bytes | None, strict: bool) -> tuple[dict, list, bool]:
    """(metadata, traceEvents, truncated) of the document parsed whole, or the exact error."""
    if data is None:
        data = path.read_bytes()
    data, cut = _decompress(path, data)
    text = data.decode("utf-8", errors="replace")
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
        _truncated(path, cut, len(raw_events), where, strict)
        return meta, raw_events, True
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        keys = sorted(doc)[:6] if isinstance(doc, dict) else type(doc).__name__
        raise KinetoFormatError(f"{path}: JSON, but not a trace: no 'traceEvents' list (found {keys})")
    events = doc.pop("traceEvents")
    return doc, events, False


def _decompress(path: Path, raw: bytes) -> tuple[bytes, bool]:
    """Plain bytes, and whether a gzip stream was cut short."""
    if not raw.startswith(b"\x1f\x8b"):
        return raw, False
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
