"""Loaded by the host-process device's worker when ``helpers/device_faults.py`` starts it (this
folder on its PYTHONPATH, ``PHOTON_TEST_DEVICE_FAULT`` naming a control file): the device side
of a device fault. It wraps the worker's forward so that every N-th decode forward runs longer,
as a device that is sometimes slow would: the worker itself spins (its own core, like a kernel
that takes longer), not the host. The control file, shared with the test process, says N and
how long (0: no fault), and the worker adds up what it injected there, as the independent
measure. Any other process leaves this file alone (no variable, nothing done)."""
import os

_path = os.environ.get("PHOTON_TEST_DEVICE_FAULT")
if _path:
    import mmap
    import time

    import numpy as np

    from photon_trace.engine.device import program as _program

    _file = open(_path, "r+b")
    _ctl = np.frombuffer(mmap.mmap(_file.fileno(), 64), dtype=np.int64, count=8)
    _forward = _program.DeviceProgram.forward

    def _slow_forward(self, slot, shape):
        _forward(self, slot, shape)
        every = int(_ctl[0])
        if every <= 0 or shape.prefill:
            return
        _ctl[2] += 1                      # decode forwards while the fault is on
        if _ctl[2] % every == 0:
            t0 = time.perf_counter_ns()
            end = t0 + int(_ctl[1])
            while time.perf_counter_ns() < end:
                pass
            _ctl[3] += 1                  # forwards slowed
            _ctl[4] += time.perf_counter_ns() - t0   # ns injected

    _program.DeviceProgram.forward = _slow_forward
