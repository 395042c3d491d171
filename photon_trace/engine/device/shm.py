"""Named shared memory for the host-process device: a file in /dev/shm mapped by both processes.

Our own mapping rather than ``multiprocessing.shared_memory``: numpy views may
outlive an explicit close there (BufferError at exit), and its resource tracker
reports mappings handed to a child it did not start as leaked. A mapping here
lives as long as any view of it; the name is unlinked at close.
"""
from __future__ import annotations

import mmap
import os
import secrets

_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None


def create(size: int) -> tuple[str, mmap.mmap]:
    import tempfile

    path = os.path.join(_DIR or tempfile.gettempdir(), f"photon-trace-{os.getpid()}-{secrets.token_hex(6)}")
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        return path, mmap.mmap(fd, size)
    finally:
        os.close(fd)


def attach(path: str) -> mmap.mmap:
    fd = os.open(path, os.O_RDWR)
    try:
        return mmap.mmap(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
