"""The zombie rule on the plain-Python scheduler (no torch, no device): a launched step holds
its rows' sequences; ``Scheduler.settle`` drops the hold at commit, and frees a finalized
sequence's pages, reservation and row only when no launched step holds it any more."""
from __future__ import annotations

from photon_trace.engine.pages import PageAllocator
from photon_trace.engine.params import SamplingParams
from photon_trace.engine.scheduler import Scheduler
from photon_trace.engine.sequence import Sequence


def scheduler() -> Scheduler:
    return Scheduler(PageAllocator(32), page_size=4, max_rows=4, max_step_tokens=64, max_seqs=4, max_context=64)


def sequence(req_id: int = 0) -> Sequence:
    return Sequence(req_id=req_id, prompt=[1, 2, 3, 4, 5], params=SamplingParams(max_tokens=8), seed=0)


def test_two_launched_steps_hold_a_sequence_and_its_last_commit_frees_it():
    sched, seq = scheduler(), sequence()
    sched.add(seq)
    sched.plan()                                   # step t: its prefill
    sched.plan()                                   # step t+1, launched before t commits: a decode row
    assert seq.inflight_refs == 2
    seq.finalized = True                           # commit(t) found a stop: t+1's row is now a zombie
    assert not sched.settle(seq, committed=True)   # commit(t): step t+1 still holds it
    assert seq.inflight_refs == 1 and seq.pages and seq.row >= 0 and not seq.freed
    sched.check_invariants()
    assert sched.settle(seq, committed=True)       # commit(t+1): nothing holds it, freed now
    assert seq.inflight_refs == 0 and seq.freed and seq.pages == [] and seq.row == -1
    assert sched.idle
    sched.check_invariants()                       # every page, row and reservation is back


def test_a_live_sequence_is_only_released_by_its_commit_never_freed():
    sched, seq = scheduler(), sequence()
    sched.add(seq)
    sched.plan()
    assert not sched.settle(seq, committed=True)
    assert seq.inflight_refs == 0 and not seq.freed and seq.pages and sched.running == [seq]


def test_an_abort_frees_now_only_what_no_launched_step_holds():
    sched = scheduler()
    waiting, idle, held = sequence(0), sequence(1), sequence(2)
    for seq in (idle, held):
        sched.add(seq)
    sched.plan()                                   # admits both in one step
    assert not sched.settle(idle, committed=True)  # that step commits for idle; held's commit waits
    assert idle.pages and held.inflight_refs == 1
    sched.add(waiting)
    for seq in (waiting, idle, held):
        seq.finalized = True                       # as RequestBook.finish(ABORT) leaves it
    assert not sched.settle(waiting, committed=False)   # never admitted: nothing to give back
    assert waiting.freed and not sched.waiting
    assert sched.settle(idle, committed=False)     # no step holds it: freed at the abort
    assert idle.freed and idle.pages == [] and sched.allocator.num_used == len(held.pages)
    assert not sched.settle(held, committed=False)  # a zombie: its last commit frees it
    assert not held.freed and held.inflight_refs == 1
    assert sched.settle(held, committed=True)
    sched.check_invariants()
    assert sched.idle and sched.allocator.all_free()
