"""Everything scripts/gpu_check.sh runs works without xgrammar, Dash, OpenTelemetry, nvtx or tqdm.

The GPU machine has python3 and CUDA torch but none of those. With them made
unimportable (``helpers/blocked_modules.py``: a ``sitecustomize`` on PYTHONPATH, so the
device worker process has them blocked too), the bench's progress bar does without tqdm.
The script's dry run runs so (``test_gpu_check_script.py``), and there the GPU test
modules collect and the bench, the CI gate and the CUPTI clock check run end to end: it
took over this module's test_the_gpu_test_modules_collect and
test_bench_check_and_the_clock_check_run.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.blocked_modules import BLOCKED, ROOT, blocked_env


@pytest.fixture(scope="module")
def blocked(tmp_path_factory):
    """run(args): a subprocess in the repository with those modules unimportable."""
    env = blocked_env(tmp_path_factory.mktemp("blocked"))

    def run(*args, timeout=600):
        return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
    return run


def test_the_blocked_modules_are_unimportable(blocked):
    for mod in BLOCKED:
        proc = blocked("-c", f"import {mod}")
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, mod


def test_the_bench_progress_bar_does_without_tqdm(blocked):
    """Asked for (no ``--no-progress``) where tqdm is missing, the bench's bar is a stand-in
    that takes every call the bench makes of it."""
    code = ("import argparse; from photon_trace.cli.bench import _progress\n"
            "bar = _progress(argparse.Namespace(no_progress=False), total=3)\n"
            "bar.set_description('s2 pipelined'); bar.update(1); bar.close()\n"
            "print(type(bar).__module__)")
    proc = blocked("-c", code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["photon_trace.cli.bench"], proc.stdout    # its stand-in, not tqdm's bar
