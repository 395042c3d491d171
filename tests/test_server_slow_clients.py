"""Slow clients cannot hold the server's open files (issue 32, item 9): two hundred connections
that send partial headers or trickle a body that never ends, byte by byte, are closed after the
header and body timeouts, the open files of the server process stay bounded by the connection
limit (twice it: the connections, and one burst of accepts) while they last, and a normal
request is answered meanwhile.

The server is ``photon-trace serve`` in its own process, so its open files are its own
(``/proc/PID/fd``), not the test's client sockets.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from helpers.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
MAX_CONNECTIONS = 32
SLOW = 200

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "stderr.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("PHOTON_TRACE_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "photon_trace.cli", "serve", "--model", "tiny", "--backend", "cpu",
                             "--port", str(port), "--max-rows", "16", "--max-seqs", "32", "--kv-tokens", "2048",
                             "--max-context", "256", "--header-timeout", "2", "--body-timeout", "3",
                             "--max-connections", str(MAX_CONNECTIONS), "--log-level", "warning"],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    url = f"http://127.0.0.1:{port}"

    def up():
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()}")
        try:
            return httpx.get(url + "/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False
    try:
        wait_until(up, 300, "the server starting")
        yield proc, port, url
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]   # slow clients are no error
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:   # still waiting on connections it should have closed
            proc.kill()
            proc.wait(30)


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_slow_clients_are_closed_and_open_files_stay_bounded_while_requests_are_served(served):
    proc, port, url = served
    base = open_files(proc.pid)
    slow, closed = [], set()
    for i in range(SLOW):
        s = socket.create_connection(("127.0.0.1", port))
        if i % 2:   # headers that never end
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        else:       # a body that never ends (declared within --max-body-bytes)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 4000000\r\n\r\n{\"prompt\": \"")
        s.setblocking(False)
        slow.append(s)
    peak = open_files(proc.pid)

    # a normal client is served while the slow ones are still there
    still_open = sum(1 for s in slow if not _closed(s))
    r = httpx.post(url + "/v1/completions", json={"prompt": "hi", "max_tokens": 4, "ignore_eos": True}, timeout=120)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4
    assert httpx.get(url + "/health", timeout=30).status_code == 200

    def all_closed() -> bool:
        nonlocal peak
        peak = max(peak, open_files(proc.pid))
        for s in slow:
            if s in closed:
                continue
            if _closed(s):
                closed.add(s)
            else:
                try:
                    s.send(b"a")          # trickle: a byte now and then must not keep it open
                except OSError:
                    closed.add(s)
        return len(closed) == len(slow)

    wait_until(all_closed, 120, "the server closing every slow connection")
    for s in slow:
        s.close()
    assert still_open > 0                 # the normal request above did meet slow clients
    assert peak <= base + 2 * MAX_CONNECTIONS + 8, (base, peak)      # connections, and one accept burst
    wait_until(lambda: open_files(proc.pid) <= base + 2, 60, "the open files back to where they were")


def _closed(s: socket.socket) -> bool:
    """Has the server closed ``s`` (its answer, if any, read and dropped)?"""
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
