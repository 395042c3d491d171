"""A trace's header: what a new one holds, and how later fields merge into it.

The header is the first line of a trace file (``file.py``) and the ``header`` of a loaded
``Trace``: format and version, settings, model, backend, device, host, the clock anchors
that map monotonic times to wall time, and what was dropped. Fields set after it was
written (``describe()``, meta lines) and drop counts merge in with ``merge_header`` and
``add_dropped``, wherever the header lives: a file being loaded, a recorder's sinks, a
live view.
"""
from __future__ import annotations

import copy
import os
import platform
import socket
import time

FORMAT_NAME = "photon_trace"
FORMAT_VERSION = 3
"""2: host spans and waits end in ``cpu_ns`` and ``runq_ns``; 3: device spans in ``runq_t0`` and
``runq_t1``. Older rows load with -1 there (``rows.OLDER_WIDTH``)."""


def photon_trace_version() -> str:
    """The package's version (``photon_trace.__version__``, the one pyproject.toml gives). Not
    ``importlib.metadata``: importing it and finding the installed distribution took 15 ms, a
    third of ``photon-trace check`` of a small profile, and it is absent from a working tree."""
    from photon_trace import __version__
    return __version__


def clock_anchor() -> dict:
    """A (wall, monotonic) pair taken together; ``wall_error_ns`` bounds the pairing error."""
    best = None
    for _ in range(5):
        m0 = time.monotonic_ns()
        w = time.time_ns()
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best[2] - best[0]:
            best = (m0, w, m1)
    m0, w, m1 = best
    return {"wall_ns": w, "mono_ns": (m0 + m1) // 2, "wall_error_ns": (m1 - m0 + 1) // 2,
            "device_error_ns": 0}


def new_header(level: str = "on", **fields: object) -> dict:
    """A complete header for a new trace; ``fields`` (settings, model, backend, device...) merge in.

    ``clock.device_error_ns`` defaults to 0, true for the host-process device,
    which stamps events with the host's own monotonic clock; the CUDA backend
    overrides it with its measured anchor error."""
    header = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "photon_trace_version": photon_trace_version(),
        "trace_level": level,
        "created_wall_ns": time.time_ns(),
        "settings": {},
        "model": None,
        "backend": None,
        "device": {"name": None},
        "host": {"hostname": socket.gethostname(), "pid": os.getpid(),
                 "python": platform.python_version(), "platform": platform.platform()},
        "clock": clock_anchor(),
    }
    merge_header(header, fields)
    return header


def merge_header(header: dict, update: dict) -> None:
    """Merge ``update`` into ``header`` in place, one level deep for dict values (e.g. ``clock``)."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(header.get(key), dict):
            header[key].update(copy.deepcopy(value))
        else:
            header[key] = copy.deepcopy(value)


def add_dropped(header: dict, dropped: dict[str, int]) -> None:
    """Accumulate ring-buffer drop counts into ``header["dropped"]``."""
    if any(dropped.values()):
        total = header.setdefault("dropped", {})
        for kind, n in dropped.items():
            if n:
                total[kind] = total.get(kind, 0) + n
