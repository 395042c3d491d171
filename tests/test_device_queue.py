"""The host-process device's command queue (``engine/device/ring.py``): batches come out in
the order they went in, across the ring's wrap and while the writer waits for room; one too
big for the ring takes the socket at its place in that order; and a worker whose host has
gone without closing it leaves, and so does its zygote."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

import photon_trace.engine.device.ring as ring
from photon_trace.engine.constraints import ResponseFormat
from photon_trace.engine.device import DeviceError
from photon_trace.engine.device.ring import CommandRing
from photon_trace.engine.params import SamplingParams
from helpers.code_sites import ROOT
from helpers.engine_helpers import Req, drive, mask_upload_sync, tiny_engine


def _take(reader: CommandRing) -> bytes | None:
    record = reader.get()
    if record is None:
        return None
    data = bytes(record)
    record.release()
    reader.advance()
    return data


def test_records_come_out_in_order_across_wraps_and_a_full_ring():
    writer = CommandRing(nbytes=1024)
    reader = CommandRing(path=writer.path)
    rng = random.Random(7)
    queued: list[bytes] = []
    taken: list[bytes] = []
    refused = 0
    for i in range(4000):
        if rng.random() < 0.55:
            data = bytes([i % 251]) * rng.randrange(0, 200)
            assert writer.fits(len(data))
            if writer.put(data):
                queued.append(data)
            else:
                refused += 1        # full: the writer waits for the reader, then puts it
                while (got := _take(reader)) is not None:
                    taken.append(got)
                assert writer.put(data)
                queued.append(data)
        elif (got := _take(reader)) is not None:
            taken.append(got)
    while (got := _take(reader)) is not None:
        taken.append(got)
    assert taken == queued
    assert refused > 0 and int(writer._count[0]) > 4 * writer.size   # it filled up and wrapped
    assert not writer.fits(writer.size)   # a record that big goes on the socket


def test_an_engine_on_a_tiny_ring_generates_what_it_does_on_the_default_one(tiny_engines, monkeypatch):
    """2 KB of ring: decode batches (40-90 bytes) wrap it every few dozen; the mask-upload
    bug's inline masks (0.7-2 KB) go on the socket, between batches in the ring. The reference
    is the session's pipelined engine (conftest) on the default ring, with the same bug."""
    point = ResponseFormat(kind="point", max_count=3)
    reqs = [Req(i % 3, [1 + i, 2, 3] * 4, SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True),
                response_format=point if i % 2 else None) for i in range(8)]
    with mask_upload_sync(tiny_engines[2]) as reference:
        expected = drive(reference, reqs).tokens
    monkeypatch.setattr(ring, "RING_BYTES", 2048)
    eng = tiny_engine(2, mask_upload="sync")
    on_socket = []
    send_bytes = eng.device._conn.send_bytes
    monkeypatch.setattr(eng.device._conn, "send_bytes", lambda data: (on_socket.append(len(data)), send_bytes(data)))
    try:
        assert drive(eng, reqs).tokens == expected
        assert on_socket and min(on_socket) > eng.device._ring.size // 4
        assert int(eng.device._ring._count[0]) > 2 * eng.device._ring.size
    finally:
        eng.close()


@pytest.fixture(scope="module")
def closed():
    """(the device, files opened before it closed) of one engine closed right after start-up:
    what both tests below read. The host hands the doorbell's read end to the worker and
    closes its copy at start-up; the number is free from then on, and the lowest free number
    is the next file's."""
    eng = tiny_engine(2)
    files = [open(os.devnull) for _ in range(64)]
    try:
        eng.close()
        yield eng.device, files
    finally:
        for f in files:
            f.close()


def test_a_launch_on_a_closed_device_is_a_device_error(closed):
    device, _ = closed
    with pytest.raises(DeviceError, match="closed"):
        device.read_token_sync(0, step=0)


def test_closing_a_device_closes_only_its_own_file_descriptors(closed):
    _, files = closed
    for f in files:
        os.fstat(f.fileno())       # EBADF had the close closed one of them again


_ORPHAN = """
import os, sys
from photon_trace.engine.engine import Engine
eng = Engine(model="tiny", backend="cpu", max_rows=4, max_step_tokens=32, max_seqs=4, kv_tokens=256,
             page_size=8, max_context=64)
pid = eng.device._proc.pid
with open(f"/proc/{pid}/stat") as f:
    parent = int(f.read().rsplit(")", 1)[1].split()[1])   # the zygote that forked it (engine/device/spawn.py)
print(os.getpid(), parent, pid, flush=True)
os._exit(0)     # gone without closing the engine: no STOP reaches the worker, no close the zygote
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.split()[1:2] == ["Z"] for line in f if line.startswith("State:"))
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_worker_and_its_zygote_leave_when_their_host_has_gone():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("PHOTON_TRACE_FRESH_WORKER", None)
    proc = subprocess.run([sys.executable, "-c", _ORPHAN], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    host, zygote, pid = map(int, proc.stdout.split()[-3:])
    assert zygote not in (host, pid)
    # a deadline, not a pace: the worker leaves as soon as it reads the bell's end, the zygote
    # as soon as it reads its socket's
    deadline = time.monotonic() + 60
    while not (_gone(pid) and _gone(zygote)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid), f"device worker {pid} still running after its host exited"
    assert _gone(zygote), f"zygote {zygote} still running after its host exited"
