"""Span times from µs to ns a column at a time, as the event loop would make each one.

The rule (``kineto_events``): an int ``ts`` is ``ts * 1000``; a float is ``round(ts * 1000)``
(half to even); the end is the start plus the duration made the same way, both Python ints,
and one beyond int64 is clipped and noted (an implausible time, reported later). ``round``
per value was a fifth of the event loop (two calls per span); numpy's ``rint`` of the same
float64 product is the same number. So a column of floats, or of ints, is converted whole when
every value stays within ±2**62 ns (a start plus a duration then fits int64, as the Python
ints would); anything else (a column mixing ints and floats, a time past that) is converted a
value at a time by the rule itself.
"""
from __future__ import annotations

import numpy as np

_LIMIT = 2 ** 62


def span_ns(ts: list, dur: list) -> tuple[np.ndarray | list, np.ndarray | list, bool]:
    """``(t0, t1, fine)`` of spans whose ``ts`` and ``dur`` (µs) are ints or finite floats: int64
    arrays, or lists of Python ints when a value needs the rule itself (``_int64`` fits those);
    ``fine``: any float with sub-µs digits."""
    start, length = _column(ts), _column(dur)
    if start is not None and length is not None:
        return start[0], start[0] + length[0], start[1] or length[1]
    t0s, t1s, fine = [], [], False
    for a, d in zip(ts, dur):
        t0 = a * 1000 if type(a) is int else round(a * 1000)
        t0s.append(t0)
        t1s.append(t0 + (d * 1000 if type(d) is int else round(d * 1000)))
        fine = fine or (type(a) is float and not a.is_integer()) or (type(d) is float and not d.is_integer())
    return t0s, t1s, fine


def flow_ns(ts: list) -> np.ndarray | list:
    """Flow times (µs, ints or finite floats) in ns: an int64 array, or Python ints by the rule
    when a value needs it."""
    column = _column(ts)
    if column is not None:
        return column[0]
    return [a * 1000 if type(a) is int else round(a * 1000) for a in ts]


def _column(values: list) -> tuple[np.ndarray, bool] | None:
    """All floats or all ints, in ns within ±2**62, and whether any float has sub-µs digits; else None."""
    if not values:
        return np.zeros(0, dtype=np.int64), False
    types = set(map(type, values))
    if types == {float}:
        f = np.array(values, dtype=np.float64)
        ns = np.rint(f * 1000.0)
        if not (np.abs(ns) < _LIMIT).all():
            return None
        return ns.astype(np.int64), bool((f != np.floor(f)).any())
    if types == {int}:
        try:
            a = np.array(values, dtype=np.int64)
        except OverflowError:
            return None
        if not ((a > -(_LIMIT // 1000)) & (a < _LIMIT // 1000)).all():
            return None
        return a * 1000, False
    return None
