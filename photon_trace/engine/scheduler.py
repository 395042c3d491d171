"""Admission and batch planning. Plain Python, no torch: everything the host can
decide without waiting for a sampled token (positions, pages, membership)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from photon_trace.telemetry.tracer import StepKind
from photon_trace.engine.model.segments import row_segments
from photon_trace.engine.pages import PageAllocator, pages_needed
from photon_trace.engine.sequence import Sequence


@dataclass(slots=True)
class Row:
    seq: Sequence
    start: int        # position of the first input token of this row
    num_tokens: int   # input tokens (1 for decode, a chunk for prefill)
    prefill: bool
    samples: bool     # publishes a token (decode rows, last prefill chunk)

    @property
    def constrained(self) -> bool:
        return self.samples and self.seq.constraint is not None


@dataclass(slots=True)
class StepPlan:
    """One step's batch. Rows are ordered so rows [0, split) are sampled at
    launch and rows [split, B) (constrained) at finalize."""
    index: int
    rows: list[Row]
    split: int
    num_tokens: int
    max_query_len: int
    max_pages: int
    kind: StepKind
    slot: int = -1
    segments: tuple = ()    # runs of rows attention handles apart (batch.row_segments)

    @property
    def num_rows(self) -> int:
        return len(self.rows)


class Scheduler:
    """Holds waiting and running sequences; ``plan`` picks the next step.

    Admission reserves a sequence's worst case (prompt + max_tokens pages) so
    a running sequence never runs out of pages: requests wait, never fail, when
    pages run short. Decode rows go first, then prefill chunks fill the step's
    token budget, so prefill interleaves with decode instead of stalling it.
    """

    def __init__(self, allocator: PageAllocator, *, page_size: int, max_rows: int,
                 max_step_tokens: int, max_seqs: int, max_context: int) -> None:
        self.allocator = allocator
        self.page_size = page_size
        self.max_context = max_context
        self.max_rows = max_rows
        self.max_step_tokens = max_step_tokens
        self.max_pages_per_row = pages_needed(max_context, page_size)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.free_rows = list(range(max_seqs - 1, -1, -1))
        self.num_rows_total = max_seqs
        self._reserved = 0  # pages promised to admitted sequences, not yet allocated
        self._step = 0

    # -- requests ------------------------------------------------------------------------
    def check_fits(self, prompt_len: int, max_tokens: int) -> None:
        """Raise ValueError unless the request fits the context (in tokens) and the KV pool."""
        if prompt_len + max_tokens > self.max_context:
            raise ValueError(f"prompt ({prompt_len} tokens) + max_tokens ({max_tokens}) exceeds the context "
                             f"of {self.max_context} tokens")
        need = pages_needed(prompt_len + max_tokens, self.page_size)
        if need > self.allocator.capacity:
            raise ValueError(f"request needs {need} KV pages, the pool has {self.allocator.capacity}")

    def add(self, seq: Sequence) -> None:
        self.check_fits(len(seq.prompt), seq.params.max_tokens)
        self.waiting.append(seq)

    # -- the zombie rule: finalize early, free late ---------------------------------------
    # A launched step holds a reference to each of its rows' sequences (``_account_launch``
    # takes it); ``settle`` drops it at that step's commit. No other code writes
    # ``inflight_refs`` or ``freed``.
    def settle(self, seq: Sequence, *, committed: bool) -> bool:
        """Apply the zombie rule to ``seq`` at the commit of a step it was a row of
        (``committed=True``: that step's reference is dropped) or once it was aborted
        (``committed=False``). A finalized sequence keeps its pages, reservation and row
        while a launched step still references it (a zombie: its commits are no-ops), and
        gives them back when none does. Returns whether they were given back now."""
        if committed:
            seq.inflight_refs -= 1
        elif seq in self.waiting:
            self.waiting.remove(seq)
            seq.freed = True                # never admitted: nothing to give back
            return False
        if not seq.finalized or seq.inflight_refs or seq.freed:
            return False
        self.allocator.free(seq.pages)
        self._reserved -= seq.reserved_pages
        seq.pages, seq.reserved_pages = [], 0
        self.free_rows.append(seq.row)
        seq.row = -1
        seq.freed = True
        self.running.remove(seq)
        return True

    @property
    def next_step(self) -> int:
        """Index the next planned step will get."""
        return self._step

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    @property
    def free_unreserved(self) -> int:
        return self.allocator.num_free - self._reserved

    def check_invariants(self) -> None:
        """Raise AssertionError on a leak or a bad count; with nothing running or waiting,
        every page, row and reservation must be back."""
        for seq in self.running:
            assert 0 <= seq.inflight_refs <= 2, seq.inflight_refs
            assert not seq.freed
        assert self._reserved >= 0, self._reserved
        if self.idle:
            assert self.allocator.all_free(), "KV pages leaked"
            assert len(self.free_rows) == self.num_rows_total, "row ids leaked"
            assert self._reserved == 0, "page reservations leaked"

    # -- planning ------------------------------------------------------------------------
    def plan(self) -> StepPlan | None:
        rows: list[Row] = []
        budget = self.max_step_tokens
        for seq in self.running:
            if len(rows) == self.max_rows or budget == 0:
                break
            if seq.wants_decode:
                rows.append(Row(seq, seq.kv_len, 1, prefill=False, samples=True))
                budget -= 1
        for seq in self.running:
            if len(rows) == self.max_rows or budget == 0:
                break
            if seq.in_prefill and not seq.finalized:  # next chunk; KV writes are stream-ordered
                rows.append(self._prefill_row(seq, budget))
                budget -= rows[-1].num_tokens
        while self.waiting and len(rows) < self.max_rows and budget > 0 and self.free_rows:
            seq = self.waiting[0]
            need = pages_needed(len(seq.prompt) + seq.params.max_tokens, self.page_size)
            if self.free_unreserved < need:
                break  # first come, first served: the head waits for pages, nobody overtakes it
            self.waiting.popleft()
            seq.row = self.free_rows.pop()
            seq.reserved_pages = need
            self._reserved += need
            self.running.append(seq)
            rows.append(self._prefill_row(seq, budget))
            budget -= rows[-1].num_tokens
        if not rows:
            return None
        return self._account_launch(rows)

    def _prefill_row(self, seq: Sequence, budget: int) -> Row:
        n = min(len(seq.prompt) - seq.prefilled, budget)
        last = seq.prefilled + n == len(seq.prompt)
        return Row(seq, seq.prefilled, n, prefill=True, samples=last)

    def _account_launch(self, rows: list[Row]) -> StepPlan:
        # Host-side accounting of the launch: positions advance now, tokens arrive later;
        # the step holds its rows' sequences until its commit (``settle``).
        for r in rows:
            seq = r.seq
            end = r.start + r.num_tokens
            have = len(seq.pages)
            want = pages_needed(end, self.page_size)
            if want > have:
                pages = self.allocator.alloc(want - have)
                assert pages is not None, "reserved pages must be available"
                seq.pages.extend(pages)
                seq.reserved_pages -= len(pages)
                self._reserved -= len(pages)
            if r.prefill:
                seq.prefilled = end
            if r.samples:
                seq.scheduled += 1
            seq.inflight_refs += 1
        rows.sort(key=lambda r: r.constrained)  # stable: unconstrained first
        split = sum(1 for r in rows if not r.constrained)
        n_prefill = sum(1 for r in rows if r.prefill)
        kind = StepKind.DECODE if n_prefill == 0 else (
            StepKind.PREFILL if n_prefill == len(rows) else StepKind.MIXED)
        plan = StepPlan(
            index=self._step, rows=rows, split=split,
            num_tokens=sum(r.num_tokens for r in rows),
            max_query_len=max(r.num_tokens for r in rows),
            max_pages=max(len(r.seq.pages) for r in rows), kind=kind)
        if plan.max_query_len > 1:
            plan.segments = row_segments([r.num_tokens for r in rows], [len(r.seq.pages) for r in rows])
        self._step += 1
        return plan
