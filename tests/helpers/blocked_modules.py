"""What the GPU machine lacks, made unimportable here: xgrammar, Dash, OpenTelemetry, nvtx and
tqdm. It has python3 and CUDA torch but none of those, and ``scripts/gpu_check.sh`` must run
there; a ``sitecustomize`` on PYTHONPATH blocks them in every Python process started with
``blocked_env`` (the device worker too, which inherits the environment)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("xgrammar", "dash", "opentelemetry", "nvtx", "tqdm")
# None in sys.modules is how a missing module looks to both ``import`` (ModuleNotFoundError)
# and ``importlib.util.find_spec`` (None), which torch itself probes for optional packages.
SITECUSTOMIZE = f"""
import sys
for name in {BLOCKED!r}:
    sys.modules[name] = None
"""


def blocked_env(site: Path) -> dict[str, str]:
    """The environment of a process in the repository with ``BLOCKED`` unimportable; writes the
    ``sitecustomize`` into the folder ``site``."""
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}   # as on a machine without third-party pytest plugins
