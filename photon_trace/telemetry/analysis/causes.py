"""One vocabulary for the bubble causes, and who can remove each.

Every consumer (the dashboard's legend and tables, ``check``'s Markdown) names a
cause with ``CAUSE_LABELS`` and says who can fix it with ``fixable_by_host``, so
a cause reads the same everywhere.

Host code can remove the idle of every cause but one: a host-bound launch (the
host was late), a commit wait (the loop waits on the device by design: pipeline
it), an accidental sync (remove the wait) and a copy wait (issue the copy
earlier, from pinned memory) all end with the host enqueueing work sooner; a
wait on another stream (an imported trace's NCCL or side stream) is the
program's own ordering, which its code can overlap or reorder.
*Device dispatch* is the device starting work it already had late: a GPU's
launch latency, the host-process device's command pickup. No change in host
code shortens it; it belongs to the device and its driver, so a diagnosis ranks
it apart from what host code can fix. So is *device busy on another stream*: a
device that runs one op at a time (the host-process worker) still finishing the
previous step's copy-back while its compute stream idles.
"""
from __future__ import annotations

CAUSE_LABELS: dict[str, str] = {
    "host_bound": "host-bound launch",
    "commit_wait": "expected commit wait",
    "accidental_sync": "accidental sync",
    "copy_wait": "copy wait",
    "stream_wait": "wait on another stream",
    "device_busy": "device busy on another stream",
    "dispatch": "device dispatch",
}

DEVICE_SIDE_CAUSES = frozenset({"dispatch", "device_busy"})
"""Causes that are the device's own latency: host code cannot shorten them."""


def cause_label(cause: str) -> str:
    """The words every report uses for ``cause`` (unknown causes keep their key)."""
    return CAUSE_LABELS.get(cause, cause.replace("_", " "))


def fixable_by_host(cause: str) -> bool:
    """True when changing host code can remove this cause's idle (see the module docstring)."""
    return cause not in DEVICE_SIDE_CAUSES


def who_fixes(cause: str) -> str:
    """``"host code"`` or ``"device-side latency"``."""
    return "host code" if fixable_by_host(cause) else "device-side latency"
