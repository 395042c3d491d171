"""What encloses a moment on a host thread of a Kineto trace: ops, annotations, Python frames.

The profiler records nested spans per thread (a ``user_annotation`` around ``cpu_op``s
around ``cuda_runtime`` calls, and with ``with_stack=True`` ``python_function`` frames
around all of them). One sweep per thread in start order answers, for many moments at
once, which spans were open then (outermost first), and finds the top-level ``cpu_op``s
(those no other ``cpu_op`` encloses): what the host was doing, at the grain of a call
the user wrote.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Hashable, Iterable

from photon_trace.telemetry.trace.importers.kineto_read import Event

NESTING_KINDS = frozenset({"cpu_op", "user_annotation", "python_function"})
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.*)$")
_LIBRARY = ("torch/", "<", "site-packages/", "dist-packages/", "/lib/python", "threading.py",
            "contextlib.py", "typing.py", "functools.py")


def sweep(spans: Iterable[Event], queries: Iterable[tuple[Hashable, Hashable, int]],
          thread_of) -> tuple[dict[Hashable, list[Event]], set[str]]:
    """The chain of open spans (outermost first) for each query, and the top-level cpu_op names.

    ``thread_of(event)`` gives an event's thread key; a query is ``(key, thread, t)``.
    A span contains ``t`` when ``t0 <= t < t1``; spans that begin at ``t`` count as open
    (a runtime call starting with its op is inside it).
    """
    by_thread: dict[Hashable, list] = defaultdict(list)
    for e in spans:
        if e.kind in NESTING_KINDS:
            by_thread[thread_of(e)].append((e.t0, 0, -e.t1, e))
    for key, thread, t in queries:
        by_thread[thread].append((t, 1, 0, key))
    chains: dict[Hashable, list[Event]] = {}
    top: set[str] = set()
    for items in by_thread.values():
        items.sort(key=lambda x: (x[0], x[1], x[2]))
        stack: list[Event] = []
        ops_open = 0
        for t, is_query, _, obj in items:
            while stack and stack[-1].t1 <= t:
                if stack.pop().kind == "cpu_op":
                    ops_open -= 1
            if is_query:
                chains[obj] = [s for s in stack if s.t1 > t]
                continue
            if obj.kind == "cpu_op":
                if ops_open == 0 or not any(s.kind == "cpu_op" and s.t1 > t for s in stack):
                    top.add(obj.name)
                ops_open += 1
            stack.append(obj)
    return chains, top


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
