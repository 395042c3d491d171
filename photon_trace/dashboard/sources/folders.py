"""The folders the dashboard may open, and how the page names what is in them: a path is
refused outside them, and no message the page can read carries an absolute path.
"""
from __future__ import annotations

import os
from pathlib import Path

from photon_trace.dashboard.sources.openable import RANKS_PREFIX, TRACE_SUFFIXES, job_files


class PathRefused(Exception):
    """A path outside the folders the dashboard may read."""


def folder_shown(folder: Path) -> str:
    """An allowed folder as a message names it: as typed relative to the working directory
    (which typed paths resolve against) when inside it, else by its name alone."""
    cwd = Path.cwd()
    return folder.relative_to(cwd).as_posix() or "." if folder.is_relative_to(cwd) else folder.name


def shown(path: str | os.PathLike, allowed_dirs: list[Path]) -> str:
    """A file as the page may name it: ``folder/relative/path`` inside an allowed folder, else
    its name alone. No message the page can read carries an absolute path: the page may be
    read by whoever reaches it, and the layout of this machine is not theirs. A job's ranks
    (``ranks:`` files, or a folder of them) are named as such."""
    text = str(path)
    if text.startswith(RANKS_PREFIX):
        names = [Path(x).name for x in text[len(RANKS_PREFIX):].split(os.pathsep) if x]
        return f"ranks: {', '.join(names)}"
    p = Path(path)
    if p.is_dir():      # a folder the store opens as one distributed job
        d = next((d for d in allowed_dirs if p.is_relative_to(d)), None)
        rel = "" if d is None or p == d else f"/{p.relative_to(d).as_posix()}"
        return f"{d.name if d is not None else p.name}{rel}/ · a job's ranks"
    for d in allowed_dirs:
        if p.is_relative_to(d):
            return f"{d.name}/{p.relative_to(d).as_posix()}"
    return p.name


def public(message: str, path: str | os.PathLike | None, allowed_dirs: list[Path]) -> str:
    """``message`` with ``path`` (a file the store was asked for), the allowed folders, the
    working and home directories named as ``shown`` and ``folder_shown`` name them (a loader
    names files by their full path, an OS error too)."""
    names = {str(d): folder_shown(d) for d in allowed_dirs}
    names.setdefault(str(Path.cwd()), ".")
    names.setdefault(str(Path.home()), "~")
    if path is not None:
        names[str(path)] = shown(path, allowed_dirs)
        names[str(Path(path).expanduser().resolve())] = shown(Path(path).expanduser().resolve(), allowed_dirs)
    for long in sorted(names, key=len, reverse=True):
        if long not in ("", "/"):
            message = message.replace(long, names[long])
    return message


def is_inside(path: str | os.PathLike, allowed_dirs: list[Path]) -> Path:
    """``path`` resolved (symlinks, ``..``) if it lies in one of ``allowed_dirs``; else ``PathRefused``."""
    if "\x00" in str(path):
        raise PathRefused("refused: the path contains a NUL byte")
    p = Path(path).expanduser().resolve()
    for d in allowed_dirs:
        if p == d or p.is_relative_to(d):
            return p
    raise PathRefused(f"refused: {Path(path).name or path} is outside the folders this dashboard may open "
                      f"({', '.join(folder_shown(d) for d in allowed_dirs)})")


def list_traces(allowed_dirs: list[Path], limit: int = 200) -> list[Path]:
    """Trace files in the allowed folders (and one level below), newest first; and the folders
    among them (and themselves) that hold one job's ranks (``job_files``), each as one entry."""
    found: dict[Path, float] = {}
    for d in allowed_dirs:
        if not d.is_dir():
            continue
        for pattern in ("*", "*/*"):
            for p in d.glob(pattern):
                if p.is_file() and p.name.endswith(TRACE_SUFFIXES):
                    try:
                        found[p.resolve()] = p.stat().st_mtime
                    except OSError:
                        pass
        for folder in [d, *(x for x in d.iterdir() if x.is_dir())]:
            files = job_files(folder)
            if files:
                found[folder.resolve()] = max(f.stat().st_mtime for f in files)
    return sorted(found, key=lambda p: -found[p])[:limit]


def newest_traces(folder: Path, n: int = 2) -> list[Path]:
    return list_traces([folder.resolve()])[:n]
