"""The suite on two pytest-xdist workers, with the tests that measure the machine run first,
with nothing beside them.

A fault test injects a delay sized from the measured step and checks that the analysis
charges it what it cost; a baseline check compares two runs' periods. Beside a second worker
(a browser test is Chromium, a server and an engine), they measured the other worker as
often as their own fault: under ``-n 2`` with plain ``--dist loadscope`` three of them
failed. So every module in ``ALONE`` goes, in collection order, to one worker, and the other
workers get nothing until the last of them has finished; then the rest is shared as
``loadscope`` shares it (one module, or class, to one worker, so module fixtures are made
once).

A worker runs a test only once it holds the next one (pytest tears down by "next item"), so
the alone worker is handed its first shared modules while its last alone test waits; they run
after it, on the same process, never beside it.
"""
from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

# Test modules whose verdicts are timings of this machine: they run alone (above). The two
# that share conftest's ``fault_runs`` must stay on one worker, as they do here.
ALONE = (
    "test_faults_attribution.py",
    "test_faults_engine.py",
    "test_faults_charging.py",
    "test_faults_device.py",
    "test_faults_host_running.py",
    "test_check_baseline_engine.py",
    "test_server_no_work.py",
)


def is_alone(scope: str) -> bool:
    return scope.split("::", 1)[0].rsplit("/", 1)[-1] in ALONE


class AloneFirstScheduling(LoadScopeScheduling):
    """``loadscope``, with the ``ALONE`` modules first on one worker and nothing beside them."""

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is None:
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = list(next(iter(self.registered_collections.values())))
            alone, shared = {}, {}
            for nodeid in self.collection:
                scope = self._split_scope(nodeid)
                (alone if is_alone(scope) else shared).setdefault(scope, {})[nodeid] = False
            self.workqueue.update(alone)      # the front of the queue, all to the first worker
            self.workqueue.update(shared)
            for _ in alone:
                self._assign_work_unit(self.nodes[0])
        for node in self.nodes:
            self._reschedule(node)

    def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
        was_alone = self._alone_pending()
        super().mark_test_complete(node, item_index, duration)
        if was_alone and not self._alone_pending():
            for other in self.nodes:          # the others have waited: two modules each, as at a start
                self._reschedule(other)
                self._reschedule(other)

    def _reschedule(self, node) -> None:
        if self._alone_pending() and not self._holds_alone(node):
            return                            # waits for the alone modules to finish
        super()._reschedule(node)

    def _holds_alone(self, node) -> bool:
        return any(is_alone(scope) and not all(unit.values())
                   for scope, unit in self.assigned_work.get(node, {}).items())

    def _alone_pending(self) -> bool:
        return any(self._holds_alone(node) for node in self.nodes)
