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

from photon_trace.telemetry.trace.importers.kineto_read import Event
from photon_trace.telemetry.trace.importers.runtime_calls import (
    CAPTURE_BEGIN_CALLS, CAPTURE_END_CALLS, GRAPH_LAUNCH_CALLS)


def graph_summary(calls: list[Event], launched_by: dict[int, Event]) -> dict:
    """What the trace's graph calls did: ``{"launches", "replayed", "kernels", "captures",
    "captured_launches", "capture_only"}`` (``calls``: every runtime call; ``launched_by``: device
    op index -> the call that launched it)."""
    graph_calls = {id(c) for c in calls if c.name in GRAPH_LAUNCH_CALLS}
    kernels = sum(1 for c in launched_by.values() if id(c) in graph_calls)
    replayed = len({id(c) for c in launched_by.values() if id(c) in graph_calls})
    captures, captured = _captures(calls)
    return {"launches": len(graph_calls), "replayed": replayed, "kernels": kernels, "captures": captures,
            "captured_launches": captured,
            # captured, and no graph ran on the device: the trace shows capturing, not running
            "capture_only": bool(captures) and replayed == 0}


def _captures(calls: list[Event]) -> tuple[int, int]:
    """(capture windows, launch calls made inside them), per thread in time order."""
    by_thread: dict[tuple, list[Event]] = defaultdict(list)
    for c in calls:
        by_thread[(c.pid, c.tid)].append(c)
    windows = captured = 0
    for seq in by_thread.values():
        seq.sort(key=lambda c: c.t0)
        open_ = False
        for c in seq:
            if c.name in CAPTURE_BEGIN_CALLS:
                open_ = True
                windows += 1
            elif c.name in CAPTURE_END_CALLS:
                open_ = False
            elif open_ and ("Launch" in c.name or "Memcpy" in c.name or "Memset" in c.name):
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
