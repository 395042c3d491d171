"""What ``photon-trace check`` of a small trace pays before any work: the imports and look-ups
every run makes whatever the trace's size (issue 31 item 1: a 28-event profile in a few
hundredths of a second). Each is checked in a fresh interpreter, since this one has imported
everything already."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_version_in_a_header_is_the_packages_without_reading_the_installed_metadata():
    got = fresh("import sys\n"
                "from photon_trace.telemetry.trace.header import photon_trace_version\n"
                "print(photon_trace_version(), 'importlib.metadata' in sys.modules)")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert got == f"{project} False"
