"""Call sites as the trace records them (``engine/engine.py:N``), found in the code itself, so
simulated traces and fault tests name lines that exist and follow them when the code moves."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def line_of(path: str | Path, needle: str, name: str | None = None) -> str:
    """'<name>:N' of the one line of ``path`` that contains ``needle`` (a line that asks for it,
    with ``line_of(`` or ``engine_line(``, does not count); ``name`` defaults to the file name."""
    src = Path(path).read_text().splitlines()
    (n,) = [i + 1 for i, line in enumerate(src)
            if needle in line and "line_of(" not in line and "engine_line(" not in line]
    return f"{name or Path(path).name}:{n}"


def engine_line(needle: str) -> str:
    """'engine/engine.py:N' of the one engine line that contains ``needle``."""
    return line_of(ROOT / "photon_trace" / "engine" / "engine.py", needle, "engine/engine.py")


COMMIT_SITE = engine_line("self.device.wait_copied(")          # commit's expected wait
MASK_SYNC_SITE = engine_line("self.device.upload_mask_sync(")  # the mask-upload bug
ITEM_SITE = line_of(ROOT / "tests" / "helpers" / "fault_helpers.py", "# the read fault (b)'s site")
