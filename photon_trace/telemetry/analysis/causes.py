"""One vocabulary for the bubble causes: each cause's words, who can remove it, and where it lies.

``Cause`` is the only place a cause is named. Attribution gives every bubble one of its
members; every consumer (the diagnosis, ``check``'s Markdown and JUnit, the Perfetto
export, the server's metrics, the dashboard's legend, tables and glossary) reads a
member's ``label`` and ``who_fixes`` from it, so a cause reads the same everywhere.
A member is a ``str`` whose value is the serialised key (``"host_bound"``): JSON,
Prometheus labels and Perfetto args carry it as it always was. Adding a cause is one
member here and its colour in the dashboard (``dashboard/timeline/palette.py``); a test
fails while a consumer lacks it.

Host code can remove the idle of every cause but three: a host-bound launch (the
host was late), a commit wait (the loop waits on the device by design: pipeline
it), an accidental sync (remove the wait) and a copy wait (issue the copy
earlier, from pinned memory) all end with the host enqueueing work sooner.
*Device dispatch* is the device starting work it already had late: a GPU's
launch latency, the host-process device's command pickup. No change in host
code shortens it; it belongs to the device and its driver, so a diagnosis ranks
it apart from what host code can fix. So is *device busy on another stream*: a
device that runs one op at a time (the host-process worker) still finishing the
previous step's copy-back while its compute stream idles. And so is a *wait on
another stream*: the op was queued, and the device held it for an op on another
of its streams (an imported trace's NCCL kernel, itself waiting for the other ranks,
or a side stream): what shortens it is that op, on the device, not the host's code.

Two causes are the host *not running* while it was late (``host_running.py`` splits a
phase's or an expected wait's late time by the thread's own counters): *host
descheduled*, runnable but not running (the machine ran something else: the deployment
fixes it, with CPU pinning or fewer processes per core), and *host blocked*, off the CPU
and not waiting on the device (the GIL another thread held, a lock, I/O, a sleep: that
other thread, or the call, fixes it). Neither is the phase's code, and neither is fixed
by pipelining; a diagnosis ranks them apart from what host code can fix. Their device-side
twin is *device descheduled*: the host-process device's worker (a process that plays the GPU)
runnable but not running while it had work queued (``device_running.py``): the deployment's too.
"""
from __future__ import annotations

from enum import Enum

HOST_CODE = "host code"
DEVICE_SIDE = "device-side latency"
DEPLOYMENT = "the deployment"
ANOTHER_THREAD = "another thread"
"""Who can fix a cause: the words of every report's "who can fix it" column (``WHO_FIXES``, in
the order reports rank them)."""
WHO_FIXES = (HOST_CODE, ANOTHER_THREAD, DEPLOYMENT, DEVICE_SIDE)

HOST_LATE = "host late"
QUEUED = "queued"
"""Where in a gap a cause lies (``attribution``): before the next op was enqueued (the host
was late), or after it (the op was queued: what the device makes of a gap once the host is
on time, the device's own tail of work included)."""


class Cause(str, Enum):
    """Why the device was idle. A member's value is its serialised key; ``label`` the words
    every report uses; ``who_fixes`` one of ``WHO_FIXES``; ``part`` ``HOST_LATE`` or ``QUEUED``."""

    label: str
    who_fixes: str
    part: str

    def __new__(cls, key: str, label: str, who_fixes: str, part: str) -> Cause:
        member = str.__new__(cls, key)
        member._value_ = key
        member.label = label
        member.who_fixes = who_fixes
        member.part = part
        return member

    #                 key                label                             who can fix it  part
    HOST_BOUND      = "host_bound",      "host-bound launch",              HOST_CODE,      HOST_LATE
    COMMIT_WAIT     = "commit_wait",     "expected commit wait",           HOST_CODE,      HOST_LATE
    ACCIDENTAL_SYNC = "accidental_sync", "accidental sync",                HOST_CODE,      HOST_LATE
    COPY_WAIT       = "copy_wait",       "copy wait",                      HOST_CODE,      QUEUED
    STREAM_WAIT     = "stream_wait",     "wait on another stream",         DEVICE_SIDE,    QUEUED
    DEVICE_BUSY     = "device_busy",     "device busy on another stream",  DEVICE_SIDE,    QUEUED
    DISPATCH        = "dispatch",        "device dispatch",                DEVICE_SIDE,    QUEUED
    HOST_DESCHEDULED = "host_descheduled", "host descheduled",             DEPLOYMENT,     HOST_LATE
    HOST_BLOCKED    = "host_blocked",    "host blocked",                   ANOTHER_THREAD, HOST_LATE
    DEVICE_DESCHEDULED = "device_descheduled", "device descheduled",       DEPLOYMENT,     QUEUED

    # Written and formatted as the key it is ("host_bound"), never as "Cause.HOST_BOUND":
    # f-strings, str() and Prometheus' label values all go through these.
    __str__ = str.__str__
    __format__ = str.__format__

    @property
    def fixable_by_host(self) -> bool:
        """True when changing host code can remove this cause's idle (see the module docstring)."""
        return self.who_fixes == HOST_CODE

    @property
    def queued(self) -> bool:
        """True for the causes the device makes: what is left of a gap once the host is on time."""
        return self.part == QUEUED


def _member(cause: str) -> Cause | None:
    """The member whose key is ``cause`` (a member or its key), None for a cause we do not know."""
    try:
        return Cause(cause)
    except ValueError:
        return None


def cause_label(cause: str) -> str:
    """The words every report uses for ``cause`` (a member or its key; unknown causes keep their key)."""
    member = _member(cause)
    return member.label if member else cause.replace("_", " ")


def fixable_by_host(cause: str) -> bool:
    """``Cause.fixable_by_host`` for a member or its key (an unknown cause counts as host code's)."""
    member = _member(cause)
    return member.fixable_by_host if member else True


def who_fixes(cause: str) -> str:
    """``Cause.who_fixes`` for a member or its key (an unknown cause: ``HOST_CODE``)."""
    member = _member(cause)
    return member.who_fixes if member else HOST_CODE


def rank_of(cause: str) -> int:
    """Where a cause's rows go in every report: by who can fix it, in ``WHO_FIXES`` order."""
    return WHO_FIXES.index(who_fixes(cause))
