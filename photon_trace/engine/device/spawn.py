"""Host side: starting a device worker process, forked by the zygote or as a fresh interpreter.

By default a worker is a child of the zygote (``zygote.py``), started once per host process
and per environment; ``PHOTON_TRACE_FRESH_WORKER=1``, or a platform without ``pidfd_open``
and ``send_fds`` (not Linux), starts each worker as a fresh interpreter instead, as before.

Either way the host gets a ``WorkerProcess``: ``pid``, ``poll``, ``wait`` (raising
``subprocess.TimeoutExpired``), ``kill`` and ``returncode``, as ``subprocess.Popen`` has them.
A forked worker is the zygote's child, not ours: a pidfd tells when it exits, and the zygote,
which reaps it only when asked, gives its exit code, so its pid cannot be reused meanwhile.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from typing import Protocol

from photon_trace.engine.device.base import DeviceError

FRESH_ENV = "PHOTON_TRACE_FRESH_WORKER"   # "1": every worker a fresh interpreter (no zygote)
# A worker gets the host's environment as it is at the fork, but what torch and its libraries
# read at import the zygote read at its own start: another value needs another zygote. These
# need none: read by the host only; set afresh for each test by pytest; set by torch itself in
# the host to its inductor cache's default, read where used (the worker sees the host's value).
_NOT_READ_AT_IMPORT = (FRESH_ENV, "PHOTON_TRACE_NO_PIN", "PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_REPLY_BYTES = 1 << 16
_POLL_S = 0.1   # how often a wait for the zygote checks that it is alive


class WorkerProcess(Protocol):
    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


def start_worker(conn_fd: int, bell: int, deadline: float) -> WorkerProcess:
    """A worker that serves the connection ``conn_fd`` and sleeps on ``bell`` (both stay the
    caller's to close). ``deadline`` (time.monotonic) bounds a wait for a zygote starting up."""
    if os.environ.get(FRESH_ENV) == "1" or not _can_fork_workers():
        return subprocess.Popen([sys.executable, "-m", "photon_trace.engine.device.worker", str(conn_fd), str(bell)],
                                pass_fds=(conn_fd, bell), env=_worker_env(), stdin=subprocess.DEVNULL)
    return _zygote().fork(conn_fd, bell, deadline)


def _can_fork_workers() -> bool:
    return hasattr(os, "pidfd_open") and hasattr(socket, "send_fds") and hasattr(os, "fork")


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, env.get("PYTHONPATH")]))
    return env


_current: Zygote | None = None
_current_lock = threading.Lock()


def _zygote() -> Zygote:
    """This process's zygote for the current environment: a new one when there is none, it
    died, the environment changed (the worker's torch reads it at import) or this process is
    a fork of the one that started it. One replaced stays until its last worker is reaped."""
    global _current
    env = _worker_env()
    key = (sys.executable, os.getpid(), tuple(sorted((k, v) for k, v in env.items() if k not in _NOT_READ_AT_IMPORT)))
    with _current_lock:
        if _current is None or _current.key != key or _current.proc.poll() is not None:
            _current = Zygote(key, env)
        return _current


class Zygote:
    def __init__(self, key: tuple, env: dict[str, str]) -> None:
        self.key = key
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-m", "photon_trace.engine.device.zygote", str(theirs.fileno())],
                                     pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        self._ctl = ours
        self._lock = threading.Lock()   # one request at a time, whichever thread starts an engine
        weakref.finalize(self, _stop_zygote, self.proc, ours, os.getpid())

    def fork(self, conn_fd: int, bell: int, deadline: float) -> WorkerProcess:
        pid = self._ask(("fork", os.getcwd(), _worker_env()), (conn_fd, bell), deadline)
        return ForkedWorker(self, pid)

    def reap(self, pid: int) -> int:
        return self._ask(("reap", pid), (), None)

    def _ask(self, request: tuple, fds: tuple[int, ...], deadline: float | None):
        with self._lock:
            try:
                socket.send_fds(self._ctl, [pickle.dumps(request)], list(fds))
                # The first request waits for the zygote's imports: watch that it lives meanwhile.
                while not select.select([self._ctl], [], [], _POLL_S)[0]:
                    if self.proc.poll() is not None:
                        break
                    if deadline is not None and time.monotonic() > deadline:
                        self.proc.kill()   # its late reply would answer the next request: a new one serves that
                        raise DeviceError("the device worker did not start in time")
                data = self._ctl.recv(_REPLY_BYTES) if self.proc.returncode is None else b""
            except OSError:
                data = b""
        if not data:
            code = self.proc.wait()
            raise DeviceError(f"the device worker died (its zygote's exit code {code})")
        reply = pickle.loads(data)
        if isinstance(reply, BaseException):
            raise reply
        return reply


def _stop_zygote(proc: subprocess.Popen, ctl: socket.socket, owner: int) -> None:
    ctl.close()   # the end of its socket: it leaves
    if os.getpid() != owner:
        return    # a fork of the host: the zygote is the parent's
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ForkedWorker:
    """A worker the zygote forked: its exit seen through a pidfd, its exit code from the zygote."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._zygote: Zygote | None = zygote   # kept alive until this worker is reaped
        self._pidfd = os.pidfd_open(pid)   # the zygote has not reaped it: the pid is still this child's
        weakref.finalize(self, os.close, self._pidfd)
        self._lock = threading.Lock()   # the engine's thread and a closing one may both see it exit

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"device worker {self.pid}", timeout)
            self._reap()
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)   # never another process: not a pid
            except ProcessLookupError:
                pass   # it has exited meanwhile

    def _reap(self) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            try:
                code = self._zygote.reap(self.pid)
            except (DeviceError, ChildProcessError):
                code = -1   # the zygote died first: init reaped the worker, its code is lost
            self.returncode = code   # the pidfd stays open till this goes: another thread may poll it
            self._zygote = None   # a replaced zygote leaves once its last worker is reaped
