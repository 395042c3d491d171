"""Call sites are cut at the package's own folder, whatever the checkout is called.

A site is ``path:line`` relative to the ``photon_trace`` package, so the same line
reads the same in every checkout; a checkout folder that is itself called
``photon_trace`` (or sits under one) must not leak into it.
"""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from photon_trace.engine.device import sites

PKG = Path(sites.__file__).resolve().parents[2]


def sites_in(checkout: Path):
    """The sites module of a copy of the package inside ``checkout`` (as a clone there has it)."""
    target = checkout / "photon_trace" / "engine" / "device" / "sites.py"
    target.parent.mkdir(parents=True)
    shutil.copy(sites.__file__, target)
    spec = importlib.util.spec_from_file_location("sites_in_checkout", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_site_in_the_package_is_relative_to_the_package():
    assert sites.site_name(str(PKG / "engine" / "engine.py"), 12) == "engine/engine.py:12"


def test_a_checkout_folder_named_like_the_package_does_not_leak_into_the_site(tmp_path):
    checkout = tmp_path / "photon_trace" / "work" / "photon_trace-main"
    mod = sites_in(checkout)
    inside = checkout / "photon_trace" / "engine" / "engine.py"
    assert mod.site_name(str(inside), 7) == "engine/engine.py:7"
    # a user's script beside the package, under folders named photon_trace: its file name only
    script = tmp_path / "photon_trace" / "work" / "photon_trace" / "scripts" / "run.py"
    assert mod.site_name(str(script), 3) == "run.py:3"


def test_first_site_skips_the_frames_it_is_told_to():
    import sys

    here = sites.first_site(sys._getframe(), lambda path: False)
    assert here.startswith("test_call_sites.py:")
    assert sites.first_site(sys._getframe(), lambda path: True) == "?"
