"""A full disk while a trace is written (issue 32, item 5): reported in one line (no traceback),
the engine runs on, and the file says where it stopped and why, so ``check`` says "the disk is
full" rather than "cut inside a line".

On a real full file system (a small tmpfs, mounted when the tests run as root) through the
whole CLI; and, everywhere, with the OS's ``write`` refusing at the boundary the file writer
calls it, plain and gzip (whose file must still decompress whole, checksum included).
"""
from __future__ import annotations

import errno
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, run_check
from photon_trace.telemetry.recording.file_writer import TraceFileWriter
from photon_trace.telemetry.trace.file import load_trace, write_trace
from photon_trace.telemetry.trace.line_file import WriteStopped
from photon_trace.telemetry.trace.records import RECORD_KINDS, Chunk
from helpers.trace_builder import pipelined_trace

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def full_disk(tmp_path):
    """An 8 KiB tmpfs: a short run's trace does not fit."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.slow
def test_a_run_that_fills_the_disk_says_so_in_one_line_and_check_says_the_disk_was_full(full_disk):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "photon_trace.cli", "check", "--run", "--streams", "4",
                           "--tokens", "16", "--out", str(full_disk)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "Traceback" not in proc.stderr and 'File "' not in proc.stderr, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "No space left on device" in line]
    assert said and all(line.startswith(("photon_trace: ", "photon-trace check: ")) for line in said), proc.stderr
    assert any("the disk is full" in line and "check: BAD INPUT" in line for line in said), proc.stderr
    (trace,) = full_disk.glob("*.trace.jsonl")
    last = trace.read_bytes().splitlines()[-1]
    assert last.startswith(b'{"stopped":') and b'"errno":"ENOSPC"' in last
    assert load_trace(trace).header["stopped"]["why"] == "the disk is full"


class RefusingWrites:
    """``os.write`` as a disk with room for ``capacity`` bytes of file ``fd``: a write past it
    takes what fits (a partial write) and the next is refused with ENOSPC, as a real full disk
    does; cutting the file (``ftruncate``) gives the room back. Other descriptors are as usual."""

    def __init__(self, real, capacity: int):
        self.real, self.capacity, self.fd = real, capacity, None

    def __call__(self, fd, data):
        if fd != self.fd:
            return self.real(fd, data)
        room = self.capacity - os.lseek(fd, 0, os.SEEK_CUR)
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real(fd, bytes(data[:room]))


ROWS = 40


def chunks(trace):
    for seq, lo in enumerate(range(0, len(trace.device_spans), ROWS), start=1):
        yield Chunk(seq=seq, **{k: getattr(trace, k)[lo:lo + ROWS] for k in RECORD_KINDS})


def sizes_after_each_chunk(trace, path: Path) -> list[int]:
    """How long the file is after its header and after each chunk, written with room to spare."""
    writer = TraceFileWriter(path)
    writer.open({"format": "photon_trace", "version": 1, **trace.header})
    out = [path.stat().st_size]
    for chunk in chunks(trace):
        writer.write(chunk)
        out.append(path.stat().st_size)
    writer.close()
    return out


@pytest.mark.parametrize("name", ["refused.trace.jsonl", "refused.trace.jsonl.gz"])
def test_a_refused_write_ends_the_file_with_why_and_where(tmp_path, monkeypatch, name):
    trace = pipelined_trace(tokens=200)
    sizes = sizes_after_each_chunk(trace, tmp_path / f"roomy-{name}")
    path = tmp_path / name
    writer = TraceFileWriter(path)
    refusing = RefusingWrites(os.write, capacity=sizes[3] + 10)    # three chunks fit, the fourth does not
    monkeypatch.setattr(os, "write", refusing)
    writer.open({"format": "photon_trace", "version": 1, **trace.header})
    refusing.fd = writer._out._fd
    with pytest.raises(WriteStopped) as info:
        for chunk in chunks(trace):
            writer.write(chunk)
    message = str(info.value)
    assert "\n" not in message and "the disk is full" in message and "No space left on device" in message
    monkeypatch.undo()
    if name.endswith(".gz"):
        gzip.decompress(path.read_bytes())            # whole: the trailer's CRC and size match
    loaded = load_trace(path)
    stopped = loaded.header["stopped"]
    assert stopped["why"] == "the disk is full" and stopped["errno"] == "ENOSPC"
    assert loaded.header["incomplete"] and not loaded.header.get("truncated")
    kept = sum(len(getattr(loaded, k)) for k in RECORD_KINDS)
    assert sum(stopped["records"].values()) == kept > 0
    assert kept + stopped.get("lines_given_up", 0) * 5 * ROWS >= 2 * 5 * ROWS   # what fitted is there
    result = run_check(path)
    assert result.exit_code == EXIT_BAD_INPUT and "the disk is full" in result.error
    assert "cut inside a line" not in result.error


def test_a_trace_written_at_once_stops_the_same_way(tmp_path, monkeypatch):
    path = tmp_path / "at_once.trace.jsonl"
    refusing = RefusingWrites(os.write, capacity=30_000)
    real_open = os.open

    def opening(p, *a, **k):
        fd = real_open(p, *a, **k)
        if str(p) == str(path):
            refusing.fd = fd
        return fd
    monkeypatch.setattr(os, "open", opening)
    monkeypatch.setattr(os, "write", refusing)
    with pytest.raises(WriteStopped):
        write_trace(pipelined_trace(tokens=200), path, chunk_rows=100)
    monkeypatch.undo()
    assert load_trace(path).header["stopped"]["why"] == "the disk is full"
