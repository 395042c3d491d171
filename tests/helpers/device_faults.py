"""Device-side faults: the host-process device's worker made slower for some of its ops.

The worker is another process, started by the engine: a test cannot patch it as it patches
the engine's collaborators (``fault_helpers.patched``). An engine built inside ``slowable`` starts
its worker with ``device_site/`` on its PYTHONPATH, whose ``sitecustomize`` wraps the worker's
forward; a control file shared with the worker switches the fault on and off at any time (the
fault gate's ``replaced`` sets ``SlowForward.every``), so a benchmark can alternate it within a
run as it does the host faults. Nothing in the package knows: no hook, no variable it reads.
"""
from __future__ import annotations

import mmap
import os
import tempfile
import weakref
from contextlib import contextmanager
from pathlib import Path

import numpy as np

SITE = Path(__file__).resolve().parent / "device_site"
VARIABLE = "PHOTON_TEST_DEVICE_FAULT"


class SlowForward:
    """The control file of one worker: every ``every``-th decode forward spins ``delay_ns`` longer
    (``every`` 0: the fault is off). ``slowed`` and ``injected_ns`` are the worker's own counts."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="device-fault-", suffix=".ctl")
        os.write(fd, bytes(64))
        os.close(fd)
        self._file = open(self.path, "r+b")
        self._ctl = np.frombuffer(mmap.mmap(self._file.fileno(), 64), dtype=np.int64, count=8)
        weakref.finalize(self, os.unlink, self.path)

    @property
    def every(self) -> int:
        return int(self._ctl[0])

    @every.setter
    def every(self, n: int) -> None:
        self._ctl[2] = 0 if n != self.every else self._ctl[2]   # count the decode forwards from here
        self._ctl[0] = n

    @property
    def delay_ns(self) -> int:
        return int(self._ctl[1])

    @delay_ns.setter
    def delay_ns(self, ns: int) -> None:
        self._ctl[1] = ns

    @property
    def slowed(self) -> int:
        return int(self._ctl[3])

    @property
    def injected_ns(self) -> int:
        return int(self._ctl[4])

    def reset_counts(self) -> None:
        self._ctl[3] = self._ctl[4] = 0


_CONTROLS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@contextmanager
def slowable():
    """Engines built in the block get a worker whose forward ``slow_forward`` can slow; yields a
    function that registers an engine built in it (``control(eng)`` finds its control later)."""
    ctl = SlowForward()
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", VARIABLE)}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), saved["PYTHONPATH"]]))
    os.environ[VARIABLE] = ctl.path
    try:
        yield lambda eng: _CONTROLS.__setitem__(eng.device, ctl)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def control(eng) -> SlowForward:
    """The control of ``eng``'s worker (built inside ``slowable`` and registered)."""
    try:
        return _CONTROLS[eng.device]
    except KeyError:
        raise RuntimeError("a device fault needs an engine built inside device_faults.slowable()") from None
