"""Ring tuples to records (trace/records.py types): draining a ring, converting in pieces.

The recorder converts inside the engine's device waits, a slice of tens of
microseconds at a time, so conversion is a generator that yields after every
``PIECE`` records: the wait checks its event between pieces.
"""
from __future__ import annotations

from collections.abc import Callable, Generator

from photon_trace.telemetry.recording.thread_clock import counters
from photon_trace.telemetry.trace.pieces import PIECE
from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, RequestRecord, StepRecord
from photon_trace.telemetry.tracer import DeviceOp, Phase, RequestEvent, StepKind, Stream

_PHASE = [p.span_name for p in sorted(Phase)]
_STREAM = [s.name.lower() for s in sorted(Stream)]
_OP = [o.name.lower() for o in sorted(DeviceOp)]
_KIND = [k.name.lower() for k in sorted(StepKind)]
_EVENT = [e.name.lower() for e in sorted(RequestEvent)]


def _host_spans(raw: list) -> list[HostSpan]:
    # the recording thread is kept as the Thread object; its name is read now; its counters
    # at begin and end (thread_clock.py) become their differences now
    return [HostSpan(_PHASE[p], int(s), int(sl), int(t0), int(t1), th.name, *counters(c0, c1))
            for p, s, sl, t0, t1, th, c0, c1 in raw]


def _device_spans(raw: list) -> list[DeviceSpan]:
    return [DeviceSpan(_STREAM[st], _OP[op], int(s), int(sl), int(t0), int(t1), int(q), int(r0), int(r1))
            for st, op, s, sl, t0, t1, q, r0, r1 in raw]


def _waits(raw: list) -> list[HostWait]:
    return [HostWait(str(r), bool(x), int(t0), int(t1), str(site), int(s), *counters(c0, c1))
            for r, x, t0, t1, site, s, c0, c1 in raw]


def _steps(raw: list) -> list[StepRecord]:
    return [StepRecord(int(s), _KIND[k], int(sl), int(r), int(z), int(c), int(n)) for s, k, sl, r, z, c, n in raw]


def _requests(raw: list) -> list[RequestRecord]:
    return [RequestRecord(int(q), _EVENT[e], int(t), int(n)) for q, e, t, n in raw]


_CONVERT = {"host_spans": _host_spans, "device_spans": _device_spans, "waits": _waits,
            "steps": _steps, "requests": _requests}


def drain(buf: list, read: int, written: Callable[[], int]) -> tuple[list, int, int]:
    """The tuples a ring ``buf`` (power-of-two length) received since write count ``read``:
    ``(tuples, lost to wrap-around, the new read count)``. ``written()`` is the ring's write
    count, read before and after copying: a writer on another thread may reuse slots meanwhile."""
    cap = len(buf)
    mask = cap - 1
    r = read
    w = written()
    lost = 0
    if w - r > cap:
        lost, r = w - r - cap, w - cap
    a, b = r & mask, w & mask
    if w == r:
        raw = []
    elif a < b:
        raw = buf[a:b]
    else:
        raw = buf[a:] + buf[:b]
    overwritten = min(written() - cap - r, len(raw))   # slots reused while we copied hold newer records
    if overwritten > 0:
        raw = raw[overwritten:]
        lost += overwritten
    return raw, lost, w


def convert(kind: str, raw: list) -> Generator[None, None, list]:
    """The records of ``kind`` for the ring tuples ``raw``; yields after each piece."""
    fn = _CONVERT[kind]
    out: list = []
    for i in range(0, len(raw), PIECE):
        out += fn(raw[i:i + PIECE])
        yield
    return out
