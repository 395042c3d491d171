"""How a host-process device's worker starts (``engine/device/spawn.py``, ``zygote.py``): forked
by one zygote per host, none of the host's threads with it, or a fresh interpreter when
``PHOTON_TRACE_FRESH_WORKER=1``; the same tokens either way; nothing left running after a
close; and a worker that dies or hangs at start is the same clear error in both ways.

Told apart by process (whose child a worker is, what it runs), never by time."""
from __future__ import annotations

import os
import signal

import pytest

import photon_trace.engine.device.hostproc as hostproc
from photon_trace.engine.device import DeviceError
from photon_trace.engine.device.spawn import FRESH_ENV
from photon_trace.engine.params import SamplingParams
from helpers.engine_helpers import tiny_engine

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")

MODES = {"zygote": None, "fresh": "1"}


def _mode(monkeypatch, mode: str) -> None:
    if MODES[mode] is None:
        monkeypatch.delenv(FRESH_ENV, raising=False)
    else:
        monkeypatch.setenv(FRESH_ENV, MODES[mode])


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _children() -> set[int]:
    """This process's child processes, whichever of its threads started them."""
    out: set[int] = set()
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            out.update(int(p) for p in f.read().split())
    return out


def _in_shm() -> set[str]:
    prefix = f"photon-trace-{os.getpid()}-"
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)} if os.path.isdir("/dev/shm") else set()


def test_engines_share_one_zygote_and_generate_what_a_fresh_worker_does(monkeypatch):
    """Two engines one after the other: both workers are children of one zygote, itself this
    process's child, running the zygote module, not ours; a worker has one thread (no thread
    of the zygote's came along). The opt-out's worker is this process's own child, a fresh
    interpreter, and the same request gives the same tokens on both. After each close the
    worker is gone, not even a zombie, and the zygote is the only child left."""
    params = SamplingParams(temperature=0.8, max_tokens=12, ignore_eos=True, seed=5)
    before = _children()
    _mode(monkeypatch, "zygote")
    tokens, zygotes = [], set()
    for _ in range(2):
        eng = tiny_engine(2)
        pid = eng.device._proc.pid
        try:
            zygote = _parent(pid)
            zygotes.add(zygote)
            assert zygote != os.getpid() and _parent(zygote) == os.getpid()
            assert "photon_trace.engine.device.zygote" in _cmdline(zygote)
            assert _threads(pid) == 1
            (out,) = eng.generate([[1, 2, 3]], params)
            tokens.append(out.token_ids)
        finally:
            eng.close()
        assert not os.path.exists(f"/proc/{pid}")
        assert eng.device._proc.returncode == 0   # it left on the STOP, not killed
    assert len(zygotes) == 1
    assert _children() - before <= zygotes

    _mode(monkeypatch, "fresh")
    eng = tiny_engine(2)
    pid = eng.device._proc.pid
    try:
        assert _parent(pid) == os.getpid() and "photon_trace.engine.device.worker" in _cmdline(pid)
        (out,) = eng.generate([[1, 2, 3]], params)
    finally:
        eng.close()
    assert not os.path.exists(f"/proc/{pid}")
    assert tokens == [out.token_ids, out.token_ids]
    assert _children() - before <= zygotes


def test_a_changed_environment_gets_its_own_zygote_and_host_only_settings_do_not(monkeypatch):
    """torch reads its settings at import, in the zygote: a worker for another environment
    needs another zygote, and the one it replaces leaves once its last worker is reaped. The
    pinning switch is the host's alone: it changes none."""
    _mode(monkeypatch, "zygote")
    closed = []   # kept, as a caller may keep a closed engine: it must not keep its zygote

    def zygote_of_a_new_engine() -> int:
        eng = tiny_engine(1)
        closed.append(eng)
        try:
            return _parent(eng.device._proc.pid)
        finally:
            eng.close()

    first = zygote_of_a_new_engine()
    monkeypatch.setenv("PHOTON_TRACE_NO_PIN", "0" if os.environ.get("PHOTON_TRACE_NO_PIN") == "1" else "1")
    assert zygote_of_a_new_engine() == first
    monkeypatch.setenv("PHOTON_TRACE_TEST_SPAWN_SETTING", "changed")
    second = zygote_of_a_new_engine()
    assert second != first and "photon_trace.engine.device.zygote" in _cmdline(second)
    # Replaced, a zygote whose workers have all been reaped leaves (not even a zombie). Only
    # this test's closed engines came from the second one (the first may serve the session's).
    monkeypatch.setenv("PHOTON_TRACE_TEST_SPAWN_SETTING", "changed again")
    third = zygote_of_a_new_engine()
    assert third not in (first, second) and not os.path.exists(f"/proc/{second}")


@pytest.mark.parametrize("gone_before_its_description", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_a_worker_killed_at_start_is_reported_with_its_exit_code(monkeypatch, mode, gone_before_its_description):
    """Killed as soon as it exists: dead by the time the host waits for it to be ready, or
    already gone when the host sends its description (the send finds the socket closed)."""
    _mode(monkeypatch, mode)
    started = []

    def killed_at_once(*args):
        proc = start_worker(*args)
        started.append(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        if gone_before_its_description:
            proc.wait()
        return proc

    start_worker = hostproc.start_worker
    monkeypatch.setattr(hostproc, "start_worker", killed_at_once)
    shm = _in_shm()
    with pytest.raises(DeviceError, match=r"^the device worker died \(exit code -9\)$"):
        tiny_engine(2)
    assert started and not os.path.exists(f"/proc/{started[0]}")
    assert _in_shm() <= shm


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_that_never_gets_ready_is_reported_and_killed(monkeypatch, mode):
    """The worker is stopped (SIGSTOP) as soon as it exists and the wait for it ends at once:
    it cannot have become ready, so the start fails, and the close that follows kills it
    (no grace: it cannot read the STOP)."""
    _mode(monkeypatch, mode)
    started = []

    def stopped(*args):
        proc = start_worker(*args)
        started.append(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)
        monkeypatch.setattr(hostproc, "_START_TIMEOUT_S", 0.0)   # for the wait that follows
        return proc

    start_worker = hostproc.start_worker
    monkeypatch.setattr(hostproc, "start_worker", stopped)
    monkeypatch.setattr(hostproc, "_STOP_GRACE_S", 0.0)
    shm = _in_shm()
    with pytest.raises(DeviceError, match="^the device worker did not start in time$"):
        tiny_engine(2)
    assert started and not os.path.exists(f"/proc/{started[0]}")
    assert _in_shm() <= shm


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two CPUs")
@pytest.mark.parametrize("mode", MODES)
def test_an_unpinned_worker_gets_every_cpu_whoever_started_it(monkeypatch, mode):
    """A pinned engine leaves its host thread off the device's core while it is open. A worker
    started meanwhile (and, forked, its zygote, started now for a setting of its own) must not
    inherit that narrowed set: an unpinned worker (two threads) may use every CPU."""
    _mode(monkeypatch, mode)
    monkeypatch.delenv("PHOTON_TRACE_NO_PIN", raising=False)
    every = os.sched_getaffinity(0)
    pinned = tiny_engine(1)
    try:
        assert os.sched_getaffinity(0) < every      # the host thread is narrowed meanwhile
        monkeypatch.setenv("PHOTON_TRACE_TEST_SPAWN_SETTING", f"narrowed {mode}")   # a zygote started now
        unpinned = tiny_engine(1, device_threads=2)
        try:
            assert os.sched_getaffinity(unpinned.device._proc.pid) == every
        finally:
            unpinned.close()
    finally:
        pinned.close()
