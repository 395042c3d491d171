"""CUDA-only sync detection beyond the host-wait audit (used by ``cuda.py``).

Every wait the device layer does itself already goes through ``_traced_wait``.
Two kinds of synchronisation can still hide from that audit on CUDA:

* **A synchronizing torch call made anywhere** (``.item()``, ``.tolist()``,
  ``nonzero``, a blocking copy...). ``SyncDebugCapture`` turns on torch's sync
  debug mode (``warn``) for a run and records each "called a synchronizing CUDA
  operation" warning as an unexpected host wait at its call site: the first
  frame outside the device layer, torch and ``warnings``. Syncs the audit already
  recorded (inside ``_traced_wait``) and one-off graph captures are skipped.
  Torch hands the warning over when the call returns, so the sync is over by then
  and its start is not observable: the wait is recorded from the device's latest
  enqueue (the host could not have been blocked before it) to the warning. That
  bounds the wait from above; its real cost, the device idle it caused, comes
  from the bubble analysis, which this wait lets it attribute.
* **A copy to or from pageable host memory**: torch does not flag a
  ``non_blocking`` copy whose host side is not pinned, but the driver then makes
  the host wait for it. ``PinnedCheck`` tells whether the host tensors of a copy
  are pinned (cached per tensor, so the steady-state cost is a dict lookup per
  buffer); ``CudaDevice`` runs a copy that is not as an unexpected host wait.
"""
from __future__ import annotations

import os
import sys
import warnings
from types import CodeType, FrameType

import torch

from photon_trace.telemetry.tracer import now_ns
from photon_trace.engine.device.sites import first_site

SYNC_WARNING = "synchronizing CUDA operation"   # torch: "called a synchronizing CUDA operation"
SYNC_REASON = "torch sync debug: a synchronizing CUDA operation"

_DEVICE_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_WARNINGS_FILE = os.path.abspath(warnings.__file__)


def _outside_the_call(path: str) -> bool:
    """Frames of the device layer, torch and ``warnings`` are how a sync is reported, not who asked."""
    return path.startswith(_DEVICE_DIR + os.sep) or path.startswith(_TORCH_DIR + os.sep) or path == _WARNINGS_FILE


class SyncDebugCapture:
    """Context manager: torch sync debug mode ``warn`` for a run, warnings recorded as waits.

    ``skip``: code objects; a sync with one of them on the stack is not recorded
    (the device layer's own audited waits, graph capture).
    """

    def __init__(self, device, skip: tuple[CodeType, ...] = ()) -> None:
        self.device = device
        self.skip = frozenset(skip)
        self.count = 0
        self._catch: warnings.catch_warnings | None = None
        self._previous_mode = 0
        self._previous_show = None

    def __enter__(self) -> SyncDebugCapture:
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.filterwarnings("always", message=f".*{SYNC_WARNING}", category=UserWarning)
        self._previous_show = warnings.showwarning
        warnings.showwarning = self._show
        self._previous_mode = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc) -> None:
        torch.cuda.set_sync_debug_mode(self._previous_mode)
        self._catch.__exit__(*exc)   # restores the filters and showwarning
        self._catch = None

    def _show(self, message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, UserWarning) and SYNC_WARNING in str(message):
            self._record(sys._getframe(1))
        else:
            self._previous_show(message, category, filename, lineno, file, line)

    def _record(self, frame: FrameType) -> None:
        f = frame
        while f is not None:
            if f.f_code in self.skip:
                return
            f = f.f_back
        self.count += 1
        t1 = now_ns()
        t0 = min(self.device.last_enqueue_ns() or t1 - 1, t1 - 1)
        self.device.tracer.host_wait(SYNC_REASON, False, t0, t1, first_site(frame, _outside_the_call), -1)


class PinnedCheck:
    """``pageable(tensors)``: is any of these host tensors not pinned? Cached per tensor object."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[torch.Tensor, bool]] = {}

    def pageable(self, tensors) -> bool:
        for t in tensors:
            hit = self._seen.get(id(t))
            if hit is None or hit[0] is not t:
                hit = (t, bool(t.is_pinned()))
                self._seen[id(t)] = hit
            if not hit[1]:
                return True
        return False
