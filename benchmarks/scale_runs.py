"""How ``bench_scale.py`` runs a measurement: a worker process per repeat, its own peak RSS, a
memory guard, a time limit, medians; and Holistic Trace Analysis in a virtual environment of its own.

Each repeat is ``scale_worker.py`` in a new process, reaped with ``os.wait4`` so its resource
usage (peak RSS) is that process's alone. While it runs, the machine's available memory is
watched: below ``guard_mb`` the worker is killed and the measurement says "did not fit" rather
than let a trace too large for the machine take it down (the machine is shared); past
``limit_s`` it is killed too and says "over the limit" (a figure far beyond its target
costs the machine more than it tells).
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "scale_worker.py"
# pandas 3 turned the upcast HTA 0.5 relies on (an int16 index column given values past 32767,
# any trace over ~32k events) into a TypeError; under pandas 2, HTA's own era, it was a warning.
HTA_REQUIREMENTS = ("HolisticTraceAnalysis==0.5.0", "pandas<3")
GUARD_MB = 4096
POLL_S = 0.2     # how often the memory guard looks (not a timing: the worker times itself)


@dataclass
class Measured:
    """Medians over the repeats that completed, of each part's seconds; the largest peak RSS."""
    seconds: dict[str, float] = field(default_factory=dict)
    rss_mb: float = 0.0
    repeats: int = 0
    info: dict = field(default_factory=dict)
    failed: str = ""     # why no figure: "did not fit", or the worker's error

    def get(self, part: str) -> float | None:
        return None if self.failed else self.seconds.get(part)


def available_mb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("inf")


def _once(python: str, stage: str, path: Path, env: dict, guard_mb: float,
          limit_s: float | None) -> tuple[dict | None, float, str]:
    """One worker run: (its result, its peak RSS in MB, why it failed or "")."""
    with tempfile.TemporaryDirectory() as tmp:
        out, log = Path(tmp) / "out.json", Path(tmp) / "log.txt"
        with open(log, "wb") as logf:
            proc = subprocess.Popen([python, str(WORKER), stage, str(path), str(out)], env=env,
                                    stdout=logf, stderr=subprocess.STDOUT, cwd=ROOT)
        killed, t0 = "", time.monotonic()
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if not killed and available_mb() < guard_mb:
                killed = f"did not fit (killed: available memory under {guard_mb / 1024:.0f} GiB)"
            elif not killed and limit_s is not None and time.monotonic() - t0 > limit_s:
                killed = f"over the limit (killed after {limit_s:.0f} s)"
            if killed:
                proc.send_signal(signal.SIGKILL)
            time.sleep(POLL_S)
        proc.returncode = os.waitstatus_to_exitcode(status)
        rss = usage.ru_maxrss / 1024
        if killed:
            return None, rss, killed
        if proc.returncode != 0 or not out.exists():
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            return None, rss, f"worker exit {proc.returncode}: {tail[0][:160]}"
        return json.loads(out.read_text()), rss, ""


def measure(stage: str, path: Path, repeats: int, *, python: str = sys.executable,
            guard_mb: float = GUARD_MB, limit_s: float | None = None) -> Measured:
    """``stage`` of ``path``, ``repeats`` times, each in a fresh worker process."""
    env = dict(os.environ)
    if python == sys.executable:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    else:
        env.pop("PYTHONPATH", None)     # HTA's environment: none of ours
    runs, rss = [], 0.0
    for _ in range(repeats):
        result, peak, why = _once(python, stage, path, env, guard_mb, limit_s)
        rss = max(rss, peak)
        if why:
            return Measured(rss_mb=rss, repeats=len(runs), failed=why)
        runs.append(result)
    parts = runs[0]["seconds"].keys()
    return Measured({p: statistics.median(r["seconds"][p] for r in runs) for p in parts}, rss, len(runs),
                    runs[-1]["info"])


def hta_python(cache: Path) -> tuple[str | None, str]:
    """The interpreter of a virtual environment holding HTA 0.5 (made in ``cache`` on first use,
    reused after): (its path, "") or (None, why there is none)."""
    venv = cache.resolve() / "hta-venv"
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import hta.trace_analysis, pandas; assert int(pandas.__version__.split('.')[0]) < 3"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return str(python), ""
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", *HTA_REQUIREMENTS],
                              capture_output=True, text=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as e:
        return None, f"could not make HTA's environment: {e}"
    if done.returncode != 0 or subprocess.run(probe, capture_output=True).returncode != 0:
        tail = [line for line in done.stderr.splitlines() if not line.startswith("WARNING")][-1:]
        return None, f"pip install {' '.join(HTA_REQUIREMENTS)} failed: {tail[0] if tail else done.returncode}"
    return str(python), ""
