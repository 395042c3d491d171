"""The event loop over ``Event`` structs (``kineto_structs.py``, ``kineto_msgspec.py``): ``EventBuilder.add``'s loop for
the events that break no rule, attribute reads instead of dict look-ups.

It keeps what the dict loop keeps, codes names, threads and lanes in the same order, and
reports nothing: at the first event that would be reported, or that holds anything the dict
loop would read differently (an integer past 64 bits, which orjson makes a float; an odd
correlation id, stream or flow id, whose value a message or a table would show), it stops, and
the block is decoded again as dicts and read by the dict loop from its start. What it did
before stopping is what the dict loop redoes the same way: the code tables grow in first-seen
order (a prefix seen twice adds nothing), ``args`` and thread names are set again by event;
its ignored counts and columns are its own until the block is done.
"""
from __future__ import annotations

import math

from photon_trace.telemetry.trace.importers.kineto_events import (
    CATEGORY_KINDS, INT64_RANGE, KEPT_ARGS, NONE, SPECS, EventBuilder)
from photon_trace.telemetry.trace.importers.kineto_scan import decode
from photon_trace.telemetry.trace.importers.kineto_structs import TypedBlock

_LO, _HI = -(2 ** 63), 2 ** 64       # orjson's ints; past these it makes floats


def add_block(builder: EventBuilder, block: list) -> None:
    """``builder.add`` of a block of events: dicts, or a ``TypedBlock`` read by the loop here
    unless an event needs the dict loop."""
    if type(block) is TypedBlock:
        if add_typed(builder, block):
            return
        block = decode(bytes(block.text))
    builder.add(block)


def add_typed(b: EventBuilder, raw: TypedBlock) -> bool:
    """Read ``raw`` into ``b`` as ``b.add`` would; False where an event needs the dict loop."""
    from photon_trace.telemetry.trace.importers.kineto_msgspec import ABSENT   # loaded: ``raw`` is its
    specs, names, thread_codes, isfinite = b._specs, b.names, b.threads, math.isfinite
    lo, hi = INT64_RANGE
    ignored: dict[str, int] = {}
    idx, kd, nm, th, tss, durs, cor, ln = [], [], [], [], [], [], [], []
    flows = {"s": ([], [], [], []), "f": ([], [], [], [])}
    i = b.n - 1
    for e in raw:
        i += 1
        ph = e.ph
        if ph == "X":
            cat = e.cat
            if type(cat) is not str:
                return False
            spec = specs.get(cat)
            if spec is None:
                if cat.lower() in CATEGORY_KINDS:
                    spec = specs[cat] = SPECS[CATEGORY_KINDS[cat.lower()]]
                else:
                    ignored[cat] = ignored.get(cat, 0) + 1
                    continue
            code, on_device, keep_args = spec
            name, ts, dur, pid, tid = e.name, e.ts, e.dur, e.pid, e.tid
            tt, td = type(ts), type(dur)
            if type(name) is not str or not (type(pid) is int and _LO <= pid < _HI or type(pid) is str) \
                    or not (type(tid) is int and _LO <= tid < _HI or type(tid) is str) \
                    or not (tt is float and isfinite(ts) or tt is int and _LO <= ts < _HI) \
                    or not (td is float and isfinite(dur) or td is int and _LO <= dur < _HI) or dur < 0:
                return False
            a = e.args
            if a is None:
                c, stream, device = None, tid, pid
            else:
                c, stream, device = a.correlation, a.stream, a.device
                c = None if c is ABSENT else c
                stream = tid if stream is ABSENT else stream
                device = pid if device is ABSENT else device
            if c is not None and not (type(c) is int and lo <= c < hi):
                return False
            if keep_args:
                kept = {} if a is None else {k: v for k in KEPT_ARGS if (v := getattr(a, k)) is not ABSENT}
                if not all(map(_plain, kept.values())):
                    return False
            lane = -1
            if on_device:
                if type(stream) is not int or not _LO <= stream < _HI or not _key(device):
                    return False
                lane = b._lane_of.get((device, stream)) if type(device) is int else None
                if lane is None:
                    lane = b._lane(device, stream)
            idx.append(i)
            kd.append(code)
            nm.append(names.setdefault(name, len(names)))
            try:
                th.append(thread_codes[(pid, tid)])
            except KeyError:
                th.append(b._thread(pid, tid))
            tss.append(ts)
            durs.append(dur)
            cor.append(NONE if c is None else c)
            ln.append(lane)
            if keep_args:
                b.args[i] = kept
        elif ph == "M":
            if e.name == "thread_name" and e.args is not None:
                name = e.args.name
                if not (e.pid is None or _key(e.pid)) or not (e.tid is None or _key(e.tid)) \
                        or not (name is ABSENT or _plain(name)):
                    return False
                b.thread_names[(e.pid, e.tid)] = str("" if name is ABSENT else name)
        elif (ph == "s" or ph == "f") and e.cat == "ac2g":
            ts = e.ts
            tt = type(ts)
            if (tt is float and isfinite(ts) or tt is int) and e.id is not ABSENT:
                fid, pid, tid = e.id, e.pid, e.tid
                if tt is int and not _LO <= ts < _HI or not (type(fid) is int and lo <= fid < hi) \
                        or not _key(pid) or not _key(tid):
                    return False
                ids, thr, ns, _ = flows[ph]
                ids.append(fid)
                try:
                    thr.append(thread_codes[(pid, tid)])
                except KeyError:
                    thr.append(b._thread(pid, tid))
                ns.append(ts)
    for cat, n in ignored.items():
        b.ignored[cat] = b.ignored.get(cat, 0) + n
    b.commit(i + 1, (idx, kd, nm, th, tss, durs, cor, ln), flows)
    return True


def _plain(v) -> bool:
    """A value both decoders read alike, whatever it is used for: no container, no int past 64 bits."""
    t = type(v)
    return t is str or t is float or t is bool or v is None or t is int and _LO <= v < _HI


def _key(v) -> bool:
    """A pid or tid both decoders read alike: a string, or an int orjson keeps an int."""
    t = type(v)
    return t is str or t is int and _LO <= v < _HI

