"""scripts/gpu_check.sh, the one prepared GPU run, made safe to run once.

The GPU machine returns at most 8 files of at most 16 MiB and gives a call 600 s;
a session gets 15 minutes of device time in all. So the script packs everything
into one tarball beside a plain summary, its stages' time boxes add up to at most
420 s (a call with a 480 s timeout, and a rerun still fits), a hung stage dumps its
Python stacks (SIGABRT with faulthandler) before it is killed, it takes ``python3``
(where the GPU machine's torch is), and the commit comes in by environment variable.
The dry run (``--backend cpu``: tiny preset, host-process device) runs every stage
here and must bring back the tarball and summary within those limits, without the
modules the GPU machine lacks (``helpers/blocked_modules.py``).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from helpers.blocked_modules import blocked_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
MIB = 1024 * 1024


def _boxes() -> dict[str, int]:
    line = next(ln for ln in SCRIPT.read_text().splitlines() if ln.startswith("T_ENV="))
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def test_the_worst_case_fits_the_budget_with_time_for_a_rerun():
    b = _boxes()
    stages = [k for k in b if k.startswith("T_")]
    worst = sum(b[k] for k in stages) + len(stages) * b["KILL_GRACE"]
    assert b["BUDGET"] == 420 and worst <= b["BUDGET"], worst
    assert worst + 60 <= 480   # the call's 480 s timeout leaves a minute beyond the worst case


def test_it_takes_python3_aborts_hung_stages_with_stacks_and_takes_the_commit_from_the_environment():
    text = SCRIPT.read_text()
    assert "PY=${PYTHON:-$(command -v python3 || command -v python)}" in text
    assert 'timeout -s ABRT -k "$KILL_GRACE"' in text and "PYTHONFAULTHANDLER=1" in text
    assert "faulthandler_timeout=" in text
    assert "PHOTON_TRACE_COMMIT=${PHOTON_TRACE_COMMIT:-" in text


def test_a_stage_killed_by_its_time_box_leaves_its_python_stacks():
    """What ``run`` does to a hung stage: SIGABRT, and faulthandler writes every thread's stack."""
    code = "import time\ndef stuck_here():\n    time.sleep(60)\nstuck_here()\n"
    proc = subprocess.run(["timeout", "-s", "ABRT", "-k", "5", "2", sys.executable, "-c", code],
                          env={**os.environ, "PYTHONFAULTHANDLER": "1"}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 124
    assert "Fatal Python error: Aborted" in proc.stderr and "stuck_here" in proc.stderr


@pytest.mark.slow
def test_the_dry_run_brings_back_a_tarball_and_a_summary_within_the_limits(tmp_path):
    """Run as on the GPU machine, without xgrammar, Dash, OpenTelemetry, nvtx or tqdm, which
    makes it also the check that everything the script runs works without them: it holds
    what ``test_gpu_path_imports.py`` checked in test_the_gpu_test_modules_collect (the GPU
    test modules collect: the pytest stage, its log free of errors) and in
    test_bench_check_and_the_clock_check_run (the bench, the gate and the clock check run:
    their stages' exits, no traceback in the gate's log, the clock check skipped on the CPU)."""
    (tmp_path / "blocked").mkdir()
    scratch, back = tmp_path / "scratch", tmp_path / "returned"
    env = {**blocked_env(tmp_path / "blocked"), "PYTHON": sys.executable, "PHOTON_TRACE_COMMIT": "c0ffee-test-commit"}
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(SCRIPT), "--backend", "cpu", str(scratch), str(back)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=_boxes()["BUDGET"] + 60)
    took = time.monotonic() - t0
    summary = (back / "summary.txt").read_text() if (back / "summary.txt").exists() else ""
    exits = dict(re.findall(r"\] (\w+): exit (\d+) in \d+ s", summary))
    # The gate's verdict is a measurement (exit 1: idle over its limit, e.g. on a loaded
    # machine), not a failure of the script; every other stage must succeed.
    assert exits == {"env": "0", "pytest": "0", "bench": "0", "check": exits.get("check"), "clock": "0",
                     "profiler": "0"}, summary
    assert exits["check"] in ("0", "1"), summary
    assert proc.returncode == int(exits["check"] != "0"), proc.stdout[-3000:] + proc.stderr[-2000:]
    assert took <= _boxes()["BUDGET"]
    returned = sorted(p.name for p in back.iterdir())
    assert returned == ["gpu_check.tgz", "summary.txt"]
    assert all((back / n).stat().st_size <= 16 * MIB for n in returned)
    assert "commit c0ffee-test-commit" in summary and f"-> exit {proc.returncode}" in summary
    with tarfile.open(back / "gpu_check.tgz") as tar:
        names = set(tar.getnames())
        bench_summary = tar.extractfile("gpu_check/bench/bench_summary.json").read().decode()
        logs = {n: tar.extractfile(f"gpu_check/{n}").read().decode() for n in ("pytest-gpu.log", "check.log", "clock.log")}
    gpu_files = next(ln for ln in summary.splitlines() if "pytest -m gpu on:" in ln).split()
    assert "tests/test_gpu_engine.py" in gpu_files and "tests/test_cuda_sync_detection.py" in gpu_files
    assert "error" not in logs["pytest-gpu.log"].lower(), logs["pytest-gpu.log"][-3000:]
    assert "Traceback" not in logs["check.log"], logs["check.log"][-3000:]
    assert "clock check skipped" in logs["clock.log"], logs["clock.log"][-3000:]
    for needed in ("environment.txt", "pytest-gpu.log", "pytest-gpu.xml", "bench.log", "bench/bench_summary.json",
                   "bench/bench-tiny-async-s8-pipelined-r1.trace.jsonl", "check.md", "check.xml", "check.log",
                   "clock.log", "clock/clock_check.json", "clock/clock.trace.jsonl", "profiler.log", "summary.txt"):
        assert f"gpu_check/{needed}" in names, needed
    assert '"commit": "c0ffee-test-commit"' in bench_summary
