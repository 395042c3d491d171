"""The suite's scheduler (``helpers/alone_first.py``): while a timing module has a test left,
no other worker holds a test, and the alone worker runs its last one only once it holds the
next (as an xdist worker does)."""
from __future__ import annotations

import pytest

pytest.importorskip("xdist")

from helpers.alone_first import AloneFirstScheduling  # noqa: E402


class FakeNode:
    def __init__(self, name):
        self.name, self.queue, self.shutting_down = name, [], False
        self.gateway = type("gateway", (), {"id": name})

    def send_runtest_some(self, indexes):
        self.queue.extend(indexes)

    def shutdown(self):
        self.shutting_down = True

    def runnable(self):
        """What a worker would run now: all but the last it holds, until it is shut down."""
        return self.queue[:1] if len(self.queue) > 1 or (self.queue and self.shutting_down) else []


COLLECTION = ([f"tests/test_a.py::t{i}" for i in range(3)]
              + [f"tests/test_faults_device.py::t{i}" for i in range(4)]
              + [f"tests/test_b.py::t{i}" for i in range(5)]
              + [f"tests/test_check_baseline_engine.py::t{i}" for i in range(2)]
              + [f"tests/test_c.py::t{i}" for i in range(3)])


def _run(nodes, sched):
    """Play the workers until everything ran; the trace of (worker, nodeid) in the order run."""
    ran = []
    for _ in range(1000):
        busy = [n for n in nodes if n.runnable()]
        if not busy:
            break
        node = busy[0]
        index = node.queue.pop(0)
        ran.append((node.name, COLLECTION[index]))
        sched.mark_test_complete(node, index)
    return ran


@pytest.mark.parametrize("workers", [2, 3])
def test_timing_modules_run_first_and_alone_and_everything_runs_once(workers):
    class Config:      # what the scheduler reads of pytest's config: the workers, as -n gives them
        option = type("option", (), {"loadscopereorder": False})

        @staticmethod
        def getvalue(name):
            return {"tx": [f"{workers}*popen"]}[name]
    sched = AloneFirstScheduling(Config)
    nodes = [FakeNode(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()
    for node in nodes[1:]:
        assert node.queue == []          # the others wait for the timing modules
    ran = _run(nodes, sched)
    assert sorted(nodeid for _, nodeid in ran) == sorted(COLLECTION)
    alone = [i for i, (_, nodeid) in enumerate(ran) if "faults" in nodeid or "baseline" in nodeid]
    assert alone == list(range(6))       # first, in collection order ...
    assert {ran[i][0] for i in alone} == {"gw0"}      # ... on one worker
    # nothing was sent to another worker before the last timing test had run
    assert all(name == "gw0" for name, _ in ran[:6])
    assert {name for name, _ in ran} == {n.name for n in nodes}   # then the rest is shared
