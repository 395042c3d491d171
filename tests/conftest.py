"""Test-wide setup: the engine-test helpers are importable; GPU and browser tests skip cleanly;
what the session shares, each made once: the fault modules' traced runs, Chromium, two
tiny engines, and one tiny server behind an API key."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402

# One intra-op thread, as the device worker uses: two threads fighting over a
# busy 2-core machine made the suite ~10x slower.
torch.set_num_threads(1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadscope`` (pyproject's addopts), the modules that measure the machine
    run first with nothing beside them (``helpers/alone_first.py``)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from helpers.alone_first import ALONE, AloneFirstScheduling

    missing = [name for name in ALONE if not os.path.exists(os.path.join(os.path.dirname(__file__), name))]
    if missing:
        raise pytest.UsageError(f"helpers/alone_first.py names test modules that do not exist: {missing}")
    return AloneFirstScheduling(config, log)


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


@pytest.fixture(scope="session")
def _playwright():
    """Playwright's sync API, started once: while it lives it leaves its event loop marked as
    running on this thread between calls, so a second start fails ("Sync API inside the asyncio
    loop") and a test that runs asyncio itself must run it on a thread of its own
    (``test_server_stream``), whatever the order the tests run in."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def pages(_playwright, tmp_path_factory):
    """Pages for the tests that load the dashboard (``helpers/browser.Pages``): one Chromium
    whose profile lives on disk for the session, so from a script's third load on V8 compiles it
    from its code cache. plotly.js alone took 2.1-2.3 s to evaluate on every load here; a page
    load went from ~4.9 s to ~2.2-3.1 s. Servers share the cache by serving on one port
    (``helpers/browser.Server``). Each test opens its own page and closes it; the dashboard
    keeps nothing in cookies or storage, so a page starts as a fresh one would. The session's
    only Chromium: a page of a high-DPI screen gets its scale from ``Pages.new``."""
    from helpers.browser import CHROMIUM, CHROMIUM_ARGS, Pages

    ctx = _playwright.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, args=CHROMIUM_ARGS,
        headless=True, device_scale_factor=1)
    yield Pages(ctx)
    ctx.close()


@pytest.fixture(scope="session")
def shared_tiny_engines():
    """The session's two tiny engines, for ``tiny_engines`` (what a test takes); a fixture of
    wider scope takes them here and leaves them settled (``engine_helpers.settle``) itself."""
    from helpers.engine_helpers import tiny_engine, unpinned

    engines: dict[int, object] = {}
    try:
        with unpinned():
            for depth in (1, 2):
                engines[depth] = tiny_engine(depth, seed=0)
        yield engines
    finally:
        for eng in engines.values():
            eng.close()


@pytest.fixture
def tiny_engines(shared_tiny_engines):
    """The session's two tiny engines (``helpers/engine_helpers.TINY``, seed 0, unpinned):
    ``{1: blocking, 2: pipelined}``, for tests that only put requests through them, each
    start being a worker process that imports torch. After each test both are settled
    (``settle``: what is in flight committed) and must then be alive with everything free:
    one that is not fails that test's teardown and is replaced, so the next test gets a
    clean one whatever the order."""
    yield shared_tiny_engines
    from helpers.engine_helpers import settle, tiny_engine, unpinned

    wrong = {}
    for depth, eng in list(shared_tiny_engines.items()):
        problem = settle(eng)
        if problem is not None:
            wrong[depth] = problem
            eng.close()
            with unpinned():
                shared_tiny_engines[depth] = tiny_engine(depth, seed=0)
    assert not wrong, f"the test left a shared engine unclean: {wrong}"


@pytest.fixture(scope="session")
def keyed_tiny_server():
    """The tiny server behind ``helpers.serving.SHARED_KEY`` (``tiny_server``), shared by the
    server modules that only send it requests (test_server_api, _openai, _vllm_fields), each
    start being an engine. Each takes it through a module fixture that checks, when the module
    is done, that it left the server idle and healthy (``left_clean``)."""
    from helpers.serving import SHARED_KEY, tiny_server

    with tiny_server(SHARED_KEY) as srv:
        yield srv
