"""Test-wide setup: the engine-test helpers are importable; GPU and browser tests skip cleanly."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402

# One intra-op thread, as the device worker uses: two threads fighting over a
# busy 2-core machine made the suite ~10x slower.
torch.set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption("--reverse", action="store_true",
                     help="run the tests in reverse order (every test must pass in any order)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--reverse"):
        items.reverse()
    try:
        import torch
        has_cuda = torch.cuda.is_available()
    except Exception:  # torch missing or broken: nothing GPU can run
        has_cuda = False
    has_chromium = os.path.exists("/usr/bin/chromium")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
        if "browser" in item.keywords and not has_chromium:
            item.add_marker(pytest.mark.skip(reason="needs /usr/bin/chromium (apt-get install chromium)"))


@pytest.fixture(scope="session")
def fault_runs(tmp_path_factory):
    """Both fault modules' traced runs (``helpers/fault_runs.py``), made once: five engine
    starts and two sets of clean runs were the suite's costliest setup."""
    from helpers.fault_runs import traced_fault_runs

    return traced_fault_runs(tmp_path_factory.mktemp("faults"))
