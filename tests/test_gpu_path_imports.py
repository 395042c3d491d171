"""Everything scripts/gpu_check.sh runs works without xgrammar, Dash, OpenTelemetry, nvtx or tqdm.

The GPU machine has python3 and CUDA torch but none of those. With them made
unimportable (a ``sitecustomize`` on PYTHONPATH, so the device worker process
has them blocked too), the GPU test modules collect, and the bench, the CI gate and the
CUPTI clock check run end to end on the CPU backend.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("xgrammar", "dash", "opentelemetry", "nvtx", "tqdm")
# None in sys.modules is how a missing module looks to both ``import`` (ModuleNotFoundError)
# and ``importlib.util.find_spec`` (None), which torch itself probes for optional packages.
SITECUSTOMIZE = f"""
import sys
for name in {BLOCKED!r}:
    sys.modules[name] = None
"""


@pytest.fixture(scope="module")
def blocked(tmp_path_factory):
    """run(args): a subprocess in the repository with those modules unimportable."""
    site = tmp_path_factory.mktemp("blocked")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}   # as on a machine without third-party pytest plugins

    def run(*args, timeout=600):
        return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
    return run


def test_the_blocked_modules_are_unimportable(blocked):
    for mod in BLOCKED:
        proc = blocked("-c", f"import {mod}")
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, mod


def test_the_gpu_test_modules_collect(blocked):
    files = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").glob("test_*.py"))
             if re.search(r"pytest\.mark\.gpu|gpu_test", p.read_text())]
    assert "tests/test_gpu_engine.py" in files and "tests/test_cuda_sync_detection.py" in files
    proc = blocked("-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider", *files)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "error" not in proc.stdout.lower()


def test_bench_check_and_the_clock_check_run(blocked, tmp_path):
    out = tmp_path / "bench"
    proc = blocked("-m", "photon_trace.cli", "bench", "--model", "tiny", "--backend", "cpu", "--streams", "2",
                   "--tokens", "8", "--repeats", "1", "--out", str(out))   # progress bar asked for: tqdm is missing
    assert proc.returncode == 0, proc.stderr[-3000:]
    trace = out / "bench-tiny-async-s2-pipelined-r1.trace.jsonl"
    proc = blocked("-m", "photon_trace.cli", "check", str(trace), "--markdown", str(tmp_path / "check.md"))
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    proc = blocked("scripts/cupti_clock_check.py", str(tmp_path / "clock"), "--model", "tiny", "--backend", "cpu",
                   "--streams", "2", "--tokens", "8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "clock check skipped" in proc.stdout
