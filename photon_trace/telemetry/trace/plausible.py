"""Which times a trace can hold: an impossible time is bad input, not data.

A trace is one run of one program, timed by one clock. A value no clock of such a run
gives is a broken writer or a damaged file, and analysing it as data gives confident
nonsense (one kernel stamped 54 years before the rest makes a 100%-idle verdict; a host op
whose ``ts`` and ``dur`` were swapped lasts 53 years; a time past 2**63 ns overflows every
int64 array downstream). The rule, checked on every load (``file.py`` for our traces,
``importers/kineto_read.py`` for the profiler's) and by the gate on a trace held in memory:

* every time is a whole number of nanoseconds in ``[0, 2**63)`` (what int64, numpy and
  Perfetto hold: 292 years from the clock's zero);
* a record ends no earlier than it starts;
* every start and end lies within ``MAX_SPREAD_NS`` (7 days) of the median start of the
  trace's records: longer than any run we trace, far shorter than the decades a wrong
  epoch or a swapped field gives.

Our own traces add one rule of their own (``unknown_steps``): a device op names a step
that has a step record (unless the recorder says it dropped some). docs/traces.md and
docs/observability.md state the rule for users.
"""
from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter, lt

import numpy as np

from photon_trace.telemetry.trace.columns import column
from photon_trace.telemetry.trace.records import DeviceSpan, Trace
from photon_trace.telemetry.trace.rows import TraceFormatError

INT64_END = 2**63
MAX_SPREAD_NS = 7 * 24 * 3600 * 10**9
RULE = ("the rule: every time in [0, 2**63) ns, no record ending before it starts, all within 7 days of the "
        "median start")


def span_of(ns: int) -> str:
    """A long duration in the unit a reader thinks of it in."""
    s = abs(ns) / 1e9
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if s >= size:
            return f"{s / size:,.1f} {unit}"
    return f"{s:,.3f} s"


def implausible(t0: Sequence[int], t1: Sequence[int], first_only: bool = True) -> list[tuple[int, str]]:
    """The records (by position) whose ``(t0, t1)`` break the rule, with what is wrong with each
    (only the first, when ``first_only``); empty when all are plausible. C-speed passes when
    they are (the usual case)."""
    if not t0:
        return []
    lo, hi = min(min(t0), min(t1)), max(max(t0), max(t1))
    if lo >= 0 and hi < INT64_END and hi - lo <= MAX_SPREAD_NS and not any(map(lt, t1, t0)):
        return []
    median = sorted(t0)[len(t0) // 2]
    out = []
    for i, (a, b) in enumerate(zip(t0, t1)):
        problem = _problem(a, b, median)
        if problem is not None:
            out.append((i, problem))
            if first_only:
                break
    return out   # empty too when the times spread over more than 7 days, none 7 days from the median


def ends_before_start(records: Sequence) -> tuple | None:
    """The first of ``records`` (a list or ``Columns``) that ends before it starts; None: none does."""
    try:
        bad = np.flatnonzero(column(records, "t1") < column(records, "t0"))
    except OverflowError:       # a time past int64 (``check_trace`` says which): one by one
        return next((r for r in records if r.t1 < r.t0), None)
    return records[int(bad[0])] if len(bad) else None


def _problem(a: int, b: int, median: int) -> str | None:
    for what, t in (("starts", a), ("ends", b)):
        if not 0 <= t < INT64_END:
            return f"{what} at {t} ns, outside [0, 2**63) ns: no clock gives that time"
    if b < a:
        return f"ends {span_of(a - b)} before it starts"
    for what, t in (("starts", a), ("ends", b)):
        if abs(t - median) > MAX_SPREAD_NS:
            side = "before" if t < median else "after"
            return (f"{what} {span_of(t - median)} {side} the median start of the trace's other records "
                    f"(more than 7 days: a wrong clock or swapped fields)")
    return None


def check_trace(trace: Trace, where: str) -> None:
    """Raise ``TraceFormatError`` (``where``: the file, or what the trace is) naming the first
    record of ``trace`` that breaks the rule, or the first device op whose step has no record."""
    if _columns_plausible(trace):
        bad = None
    else:
        bad = _first_implausible(trace)
    if bad is not None:
        raise TraceFormatError(f"{where}: {bad} ({RULE})")
    missing = unknown_steps(trace)
    if missing is not None:
        i, d = missing
        raise TraceFormatError(f"{where}: {_describe('device_spans', i, d)} names step {d.step}, which has no step "
                               f"record (and the recorder dropped none)")


def _columns_plausible(trace: Trace) -> bool:
    """The rule's usual case, checked over whole columns at C speed: every time plausible (False:
    some may not be, or a time does not fit int64; ``_first_implausible`` then finds which)."""
    try:
        t0 = [column(getattr(trace, k), "t" if k == "requests" else "t0") for k in _KINDS]
        t1 = [column(getattr(trace, k), "t" if k == "requests" else "t1") for k in _KINDS]
        enqueued = column(trace.device_spans, "enqueued")
    except OverflowError:
        return False
    a, b = np.concatenate(t0), np.concatenate(t1)
    if not len(a):
        return True
    lo, hi = min(int(a.min()), int(b.min())), max(int(a.max()), int(b.max()))
    return (lo >= 0 and hi - lo <= MAX_SPREAD_NS and not (b < a).any()
            and (not len(enqueued) or int(enqueued.min()) >= 0))


_KINDS = ("host_spans", "device_spans", "waits", "requests")


def _first_implausible(trace: Trace) -> str | None:
    """The first record that breaks the rule, described (None: none does)."""
    kinds = (("host_spans", 3, 4), ("device_spans", 4, 5), ("waits", 2, 3), ("requests", 2, 2))
    t0: list[int] = []
    t1: list[int] = []
    owner: list[tuple[str, int]] = []        # (kind, offset of its first record in t0)
    for kind, a, b in kinds:
        rows = getattr(trace, kind)
        owner.append((kind, len(t0)))
        t0 += map(itemgetter(a), rows)
        t1 += map(itemgetter(b), rows)
    bad = implausible(t0, t1)
    if not bad:
        enqueued = [d.enqueued for d in trace.device_spans]
        if enqueued and not (0 <= min(enqueued) and max(enqueued) < INT64_END):
            i = next(i for i, t in enumerate(enqueued) if not 0 <= t < INT64_END)
            bad = [(owner[1][1] + i, f"was enqueued at {enqueued[i]} ns, outside [0, 2**63) ns")]
    if not bad:
        return None
    i, problem = bad[0]
    kind, first = next((k, f) for k, f in owner if f <= i < f + len(getattr(trace, k)))
    return f"{_describe(kind, i - first, getattr(trace, kind)[i - first])} {problem}"


def unknown_steps(trace: Trace) -> tuple[int, DeviceSpan] | None:
    """The first device op of one of our traces whose step has no step record; None when every
    one has (or the trace has no step records, or its recorder dropped some)."""
    if not trace.steps or (trace.header.get("dropped") or {}).get("steps"):
        return None
    unknown = ~np.isin(column(trace.device_spans, "step"), column(trace.steps, "step"))   # columns: no tuple each
    if not unknown.any():
        return None
    i = int(np.flatnonzero(unknown)[0])
    return i, trace.device_spans[i]


def _describe(kind: str, i: int, r: tuple) -> str:
    """A record as a message names it: its list, its position there, and what it is."""
    if kind == "host_spans":
        what = f"host span {r.phase!r}, step {r.step}"
    elif kind == "device_spans":
        what = f"device op {r.op!r} on {r.stream!r}, step {r.step}"
    elif kind == "waits":
        what = f"host wait {r.reason[:60]!r}, step {r.step}"
    else:
        what = f"request {r.req_id} {r.event!r}"
    return f"{kind} record {i} ({what})"
