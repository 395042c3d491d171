"""Call sites are cut at the package's own folder, wherever the checkout lives."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from photon_trace.engine.device import sites

PKG = Path(sites.__file__).resolve().parents[2]


def test_a_site_in_the_package_is_relative_to_it_and_one_outside_is_its_file_name(tmp_path):
    assert sites.site_name(str(PKG / "engine" / "engine.py"), 168) == "engine/engine.py:168"
    stranger = tmp_path / "photon_trace" / "engine" / "engine.py"   # a folder named like the package
    assert sites.site_name(str(stranger), 5) == "engine.py:5"


def test_a_checkout_under_a_folder_named_photon_trace_gives_the_same_sites(tmp_path):
    """The checkout's own path may contain ``photon_trace/`` (a clone called photon_trace):
    sites must still read ``engine/engine.py:N``, or no site compares across machines."""
    checkout = tmp_path / "photon_trace" / "clone"
    shutil.copytree(PKG, checkout / "photon_trace", ignore=shutil.ignore_patterns("__pycache__"))
    code = ("from photon_trace.engine.device import sites; import os\n"
            "print(sites.site_name(os.path.join(os.path.dirname(sites.__file__), '..', 'engine.py'), 7))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "engine/engine.py:7"
