"""What encloses a moment on a host thread of a Kineto trace: ops, annotations, Python frames.

The profiler records nested spans per thread (a ``user_annotation`` around ``cpu_op``s
around ``cuda_runtime`` calls, and with ``with_stack=True`` ``python_function`` frames
around all of them). ``Nesting`` holds each thread's spans in the order a stack of them is
pushed (start, longest first) as columns: it answers which spans were open at a moment
(outermost first) without walking the thread, and finds the top-level ``cpu_op``s (those no
other ``cpu_op`` encloses: what the host was doing, at the grain of a call the user wrote)
with a running maximum of ends.
"""
from __future__ import annotations

import re

import numpy as np

from photon_trace.telemetry.trace.importers.kineto_events import CODE, Event, EventTable

NESTING_KINDS = frozenset({"cpu_op", "user_annotation", "python_function"})
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.*)$")
_LIBRARY = ("torch/", "<", "site-packages/", "dist-packages/", "/lib/python", "threading.py",
            "contextlib.py", "typing.py", "functools.py")
_BLOCK = 256        # spans per block whose latest end is kept: a query skips blocks closed before it


class Nesting:
    """The nesting spans (``rows`` of ``events``: cpu ops, annotations, Python frames) of each
    thread in start order (longest first among equal starts, then file order): the order a
    stack of open spans is pushed in."""

    def __init__(self, events: EventTable, rows: np.ndarray):
        self.events = events
        order = np.lexsort((-events.t1[rows], events.t0[rows], events.thread[rows]))
        self.rows = rows[order]
        threads = events.thread[self.rows]
        self.t0, self.t1 = events.t0[self.rows], events.t1[self.rows]
        cut = np.flatnonzero(threads[1:] != threads[:-1]) + 1
        bounds = np.concatenate([[0], cut, [len(self.rows)]]).tolist()
        self.segment = {int(threads[a]): (a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a}
        self._blocks: dict[int, np.ndarray] = {}

    def top_level_ops(self) -> set[str]:
        """The names of the cpu ops no other cpu op of their thread encloses: each begins when
        every cpu op pushed before it on its thread has ended."""
        ev = self.events
        top: set[int] = set()
        ops = ev.kind[self.rows] == CODE["cpu_op"]
        for a, b in self.segment.values():
            sel = np.flatnonzero(ops[a:b]) + a
            if not len(sel):
                continue
            reach = np.maximum.accumulate(self.t1[sel])
            before = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
            top.update(ev.name[self.rows[sel[before <= self.t0[sel]]]].tolist())
        return {ev.names[c] for c in top}

    def open_at(self, thread: int, t: int) -> list[int]:
        """The rows of the spans open on ``thread`` at ``t`` (``t0 <= t < t1``; one beginning at
        ``t`` is open: a runtime call starting with its op is inside it), outermost first."""
        seg = self.segment.get(thread)
        if seg is None:
            return []
        a, b = seg
        k = a + int(np.searchsorted(self.t0[a:b], t, side="right"))
        blocks = self._blocks.get(thread)
        if blocks is None:
            ends = self.t1[a:b]
            pad = (-len(ends)) % _BLOCK
            blocks = np.concatenate([ends, np.full(pad, np.iinfo(np.int64).min)]).reshape(-1, _BLOCK).max(axis=1)
            self._blocks[thread] = blocks
        full = (k - a) // _BLOCK
        hit = np.flatnonzero(blocks[:full] > t)
        parts = [np.arange(a + h * _BLOCK, a + (h + 1) * _BLOCK) for h in hit.tolist()]
        parts.append(np.arange(a + full * _BLOCK, k))
        cand = np.concatenate(parts)
        return self.rows[cand[self.t1[cand] > t]].tolist()


def python_frame(chain: list[Event]) -> str | None:
    """The innermost Python frame in ``chain`` that is the program's own code, as ``file:line (func)``.

    Library frames (torch, site-packages, the standard library's plumbing, built-ins) are
    skipped: a sync inside ``torch/_tensor.py`` was caused by the line that called it.
    """
    fallback = None
    for e in reversed(chain):
        if e.kind != "python_function":
            continue
        m = _FRAME.match(e.name)
        if m is None:
            continue
        where = f"{m['file']}:{m['line']} ({m['func']})"
        if not any(part in m["file"] or m["file"].startswith(part) for part in _LIBRARY):
            return where
        fallback = fallback or where
    return fallback


def call_site(chain: list[Event], is_step) -> str:
    """Where a runtime call was made: the Python line (with stacks), then the outermost op
    and the innermost op or annotation around the call (``aten::item > aten::_local_scalar_dense``:
    the call the program made, and the op that synchronised).

    Step annotations (``is_step(event)``) are not a site: a sync directly in a step's body
    is ``"<step name> body"`` (the step number dropped, so one line of code is one site).
    """
    ops = [e for e in chain if e.kind in ("cpu_op", "user_annotation") and not is_step(e)]
    inner = ops[-1] if ops else None
    outer = next((e for e in ops if e.kind == "cpu_op"), None)
    op = None
    if inner is not None:
        op = inner.name if outer is None or outer is inner else f"{outer.name} > {inner.name}"
    parts = [p for p in (python_frame(chain), op) if p]
    if parts:
        return " · ".join(parts)
    step = next((e for e in reversed(chain) if is_step(e)), None)
    return f"{step.name.split('#')[0]} body" if step is not None else "(no enclosing op)"
