"""The device workers' zygote: one fresh interpreter that imported torch once and forks a worker per engine.

A worker that is a fresh interpreter pays for importing torch (1.5-2.5 s of CPU on a
2-core machine) at every engine start. This process pays it once for all the engines
of its host (``spawn.py`` starts it, as a fresh interpreter, on the first engine) and
then forks: a worker is ready to receive its device's description in milliseconds.

What the fresh interpreter bought is kept. The zygote is started with ``-m``, so no
caller's ``__main__`` is imported; it runs no torch op, so no intra-op (OpenMP) pool
exists when it forks, and each child sets its own thread count first; it starts no
threads of its own (numpy's OpenBLAS pool is shut down by OpenBLAS's own fork handler).
A child closes the zygote's control socket at once, so it holds no other worker's files.

Protocol, on a SOCK_SEQPACKET socket (one message a request, one a reply), one
request at a time: ``("fork", cwd, environ)`` with two file descriptors (the worker's end of its
connection and the doorbell's read end) -> the child's pid; ``("reap", pid)`` for a child
the host saw exit (its pidfd) -> its exit code, as ``Popen.returncode`` gives it. The
zygote leaves when the socket reaches its end: its host has gone (killed too: the kernel
closes its end) or closed it. Not PR_SET_PDEATHSIG: that fires when the host *thread* that
started the zygote ends, and a server starts engines on threads that come and go.
"""
from __future__ import annotations

import os
import pickle
import signal
import socket
import sys
import warnings
from multiprocessing.connection import Connection

import torch._dynamo  # noqa: F401 (nn.init imports it at a model's first build: 1-1.7 s a worker otherwise)

import photon_trace.engine.device.worker as _worker   # torch and the model code: what every child shares

# Python 3.12 warns at a fork while the process has other threads: here only OpenBLAS's pool,
# which OpenBLAS's own fork handler stops first (a child has one thread: tests/test_device_spawn.py).
warnings.filterwarnings("ignore", message=r".*multi-threaded, use of fork\(\) may lead to deadlocks",
                        category=DeprecationWarning)

_MAX_MESSAGE = 1 << 20   # a fork request carries the host's environment


def serve(ctl: socket.socket) -> None:
    # Ctrl-C reaches the whole process group: the workers stop as before, the zygote stays
    # for the host's next engine (the host ends it by closing the socket).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(ctl, _MAX_MESSAGE, 2)
        except OSError:
            return
        if not data:
            return
        try:
            reply = _answer(ctl, pickle.loads(data), fds)
        except Exception as e:   # noqa: BLE001 (a request that fails is the host's error; the zygote stays)
            for fd in fds:
                _close_quietly(fd)
            reply = e
        ctl.sendall(pickle.dumps(reply))


def _answer(ctl: socket.socket, request: tuple, fds: list[int]):
    if request[0] == "fork":
        return _fork(ctl, fds, request[1], request[2])
    if request[0] == "reap":
        _, status = os.waitpid(request[1], 0)   # asked once the child's pidfd said it exited
        return os.waitstatus_to_exitcode(status)
    raise ValueError(f"unknown request {request[0]!r}")


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _fork(ctl: socket.socket, fds: list[int], cwd: str, environ: dict[str, str]) -> int:
    conn_fd, bell = fds
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            ctl.close()
            signal.signal(signal.SIGINT, signal.default_int_handler)   # a worker as a fresh one would be
            os.chdir(cwd)   # relative checkpoint paths are the host's
            os.environ.clear()   # the host's now (the zygote's differs at most in what spawn.py ignores)
            os.environ.update(environ)
            code = _worker.worker_main(Connection(conn_fd), bell)
        finally:
            _worker.leave(code)   # never back into the zygote's loop
    os.close(conn_fd)
    os.close(bell)
    return pid


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
    _worker.leave(0)
