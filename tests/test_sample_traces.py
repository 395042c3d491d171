"""The sample traces in traces/ are the current code's: every host wait they record names a
line of the package that really waits.

A call site is ``path:line`` of the first frame outside the device layer that asked for the
wait (``engine/device/sites.py``). When the engine's code moves and the samples are not made
again (``scripts/sample_traces.sh``), the dashboard and the docs' screenshots point users at a
line that does something else: this test fails then.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from photon_trace.telemetry.trace.file import load_trace

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "photon_trace"
SAMPLES = sorted((ROOT / "traces").glob("*.trace.jsonl"))


def _waiting_methods() -> set[str]:
    """Names of the device layer's methods that wait for the device: those whose body calls
    ``_traced_wait`` (the one place a host wait is timed and recorded)."""
    names = set()
    for path in (PKG / "engine" / "device").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                calls = (c for c in ast.walk(node) if isinstance(c, ast.Call))
                if any(isinstance(c.func, ast.Attribute) and c.func.attr == "_traced_wait" for c in calls):
                    names.add(node.name)
    return names


WAITING = _waiting_methods()


def test_the_device_layer_has_waiting_methods_to_check_against():
    assert {"wait_copied", "upload_mask_sync", "read_token_sync"} <= WAITING, WAITING


def test_there_are_sample_traces():
    assert len(SAMPLES) >= 4, SAMPLES


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_every_recorded_call_site_is_a_line_that_waits(path):
    trace = load_trace(path)
    sites = {w.site for w in trace.waits}
    assert sites, f"{path.name} records no host wait (every run has its commit waits)"
    calls = re.compile(r"\.(%s)\(" % "|".join(sorted(WAITING)))
    for site in sorted(sites):
        file, _, line = site.rpartition(":")
        source = PKG / file
        assert source.is_file(), f"{path.name}: {site} names no file of the package"
        lines = source.read_text(encoding="utf-8").splitlines()
        text = lines[int(line) - 1] if 0 < int(line) <= len(lines) else ""
        assert calls.search(text), (f"{path.name}: {site} is `{text.strip()}`, not a call of a waiting "
                                    f"device method ({', '.join(sorted(WAITING))}); make the samples "
                                    "again: scripts/sample_traces.sh")
