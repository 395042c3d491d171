"""Call sites: which line of code asked for a host wait.

A site is written ``path:line`` with the path relative to the ``photon_trace``
package (``engine/engine.py:194``), or the file's name for code outside it (a
test, a user's script). The package is found from this file's location, never by
searching the path for the package's name: a checkout folder can be called
anything, ``photon_trace`` included.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from types import FrameType

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def site_name(path: str, line: int) -> str:
    """``path:line`` as the trace records it."""
    path = os.path.abspath(path)
    if path.startswith(_PACKAGE_DIR + os.sep):
        rel = path[len(_PACKAGE_DIR) + 1:]
    else:
        rel = os.path.basename(path)
    return f"{rel.replace(os.sep, '/')}:{line}"


def first_site(frame: FrameType | None, skip: Callable[[str], bool]) -> str:
    """The site of the first frame (walking outwards) whose absolute file path ``skip``
    does not reject; "?" if every frame is skipped."""
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith("<") and not skip(os.path.abspath(path)):
            return site_name(path, frame.f_lineno)
        frame = frame.f_back
    return "?"
