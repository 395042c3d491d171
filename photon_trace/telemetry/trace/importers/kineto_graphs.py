"""CUDA (and HIP) graphs in a profiler trace: replays, and captures that never ran.

**A replay** is one ``cudaGraphLaunch`` (``hipGraphLaunch``) whose kernels all carry its
correlation id: one enqueue for the whole graph, so every kernel's ``enqueued`` is that call's
start, and the gaps between them are the graph's own scheduling, not launches the host was
late with (``analysis/attribution.py`` reads ops sharing an enqueue that way).

**A capture** records launches into a graph between ``cudaStreamBeginCapture`` and
``cudaStreamEndCapture`` on a thread: the launches run nothing. A trace of a capture and
nothing more (vLLM warming up: thousands of launches, a handful of device ops) is no
picture of the device at work: its idle would be a false alarm, so the header says
``capture_only`` and ``check`` does not gate idle on it (a real sync in it still fails).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from photon_trace.telemetry.trace.distinct import distinct
from photon_trace.telemetry.trace.importers.kineto_events import EventTable
from photon_trace.telemetry.trace.importers.runtime_calls import (
    CAPTURE_BEGIN_CALLS, CAPTURE_END_CALLS, GRAPH_LAUNCH_CALLS)


def graph_summary(events: EventTable, calls: np.ndarray, launcher: np.ndarray) -> dict:
    """What the trace's graph calls did: ``{"launches", "replayed", "kernels", "captures",
    "captured_launches", "capture_only"}`` (``calls``: the rows of every runtime call;
    ``launcher``: per device op kept, the row of the call that launched it, -1 when unknown)."""
    is_graph = np.array([n in GRAPH_LAUNCH_CALLS for n in events.names], dtype=bool)
    graph_calls = calls[is_graph[events.name[calls]]] if len(events.names) else calls[:0]
    linked = launcher[launcher >= 0]
    by_graph = linked[is_graph[events.name[linked]]] if len(linked) else linked
    replayed = len(distinct(by_graph))
    captures, captured = _captures(events, calls)
    return {"launches": len(graph_calls), "replayed": replayed, "kernels": len(by_graph), "captures": captures,
            "captured_launches": captured,
            # captured, and no graph ran on the device: the trace shows capturing, not running
            "capture_only": bool(captures) and replayed == 0}


def _captures(events: EventTable, calls: np.ndarray) -> tuple[int, int]:
    """(capture windows, launch calls made inside them), per thread in time order."""
    begins = {c for c, n in enumerate(events.names) if n in CAPTURE_BEGIN_CALLS}
    if not begins or not np.isin(events.name[calls], list(begins)).any():
        return 0, 0
    by_thread: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for r in calls.tolist():
        by_thread[int(events.thread[r])].append((int(events.t0[r]), events.names[events.name[r]]))
    windows = captured = 0
    for seq in by_thread.values():
        seq.sort(key=lambda c: c[0])
        open_ = False
        for _, name in seq:
            if name in CAPTURE_BEGIN_CALLS:
                open_ = True
                windows += 1
            elif name in CAPTURE_END_CALLS:
                open_ = False
            elif open_ and ("Launch" in name or "Memcpy" in name or "Memset" in name):
                captured += 1
    return windows, captured


def graph_line(g: dict) -> str | None:
    """One line for a report, or None when the trace has no graph call."""
    if g.get("capture_only"):
        return (f"CUDA-graph capture only: {g['captures']:,} capture(s) recorded {g['captured_launches']:,} launches "
                f"into graphs and no graph ran: the device was not meant to run them, so its idle is no verdict "
                f"(check does not gate it)")
    parts = []
    if g.get("launches"):
        parts.append(f"{g['launches']:,} graph launch(es) ran {g['kernels']:,} device ops (one enqueue per launch)")
    if g.get("captures"):
        parts.append(f"{g['captures']:,} capture(s) of {g['captured_launches']:,} launches")
    return "CUDA graphs: " + "; ".join(parts) if parts else None
