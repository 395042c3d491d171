"""``shared_splits``' pass over the window's gaps, the carried lane taken a block of gaps at a time.

``carried.carried_split`` splits a gap the carried sync charge covers without the general rules,
but each gap still costs its two op records, a ``Gap``, the timeline's searches, a ``GapSplit``,
and the three consumers that read it back (``SplitTable.add``, the window's bubbles, the syncs'):
~40 us a gap, most of checking a million-span trace of ours. Here what the lane needs of each gap
is read for a block of gaps at once (the ends, enqueues and steps as lists, where the host
regained its lead and where each gap's chain and host-late part lie on the host timeline, by one
``searchsorted`` each), the lane's rules (``carried``) run on plain integers, and its answer goes
straight into the consumers' columns, in the order they would have written it. A gap the lane
does not take is split and read as before, from the same state. The gaps before and after the
window (warm-up and drain: ~5% of them) go the same way for the whole run's syncs alone.
``tests/test_analysis_carried.py`` checks the pass against the gap-by-gap one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from photon_trace.telemetry.analysis.attribution import Attribution
from photon_trace.telemetry.analysis.bubble_table import BubbleColumns
from photon_trace.telemetry.analysis.bubbles import Gap
from photon_trace.telemetry.analysis.carried import Carry
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.gap_parts import GRAPH_NODES, LAUNCH_LATENCY
from photon_trace.telemetry.analysis.gaps import Gaps
from photon_trace.telemetry.analysis.host_timeline import OUTSIDE_PHASES
from photon_trace.telemetry.analysis.split_table import NONE, SplitTable

BLOCK = 1 << 13
SYNC, HOST, DISPATCH = Cause.ACCIDENTAL_SYNC, Cause.HOST_BOUND, Cause.DISPATCH


def applies(att: Attribution) -> bool:
    """Whether the lane can be taken at all (``carried_split``'s conditions on the whole trace)."""
    return not (att.serial or att.no_work or att._timeline.some_counted)


def window_pass(run: Attribution, big: Gaps, lo: int, hi: int, inside: Gaps | None, first: int, waited: list[bool],
                table: SplitTable | None, bubbles: BubbleColumns | None, syncs: BubbleColumns) -> None:
    """``shared_splits``' loop body for the gaps ``big[lo:hi]`` once one split serves both passes:
    each gap split by ``run``, read into ``table`` and ``bubbles`` (clipped as ``inside[i - first]``)
    and its sync parts into ``syncs`` (clipped as ``big``). Outside the window (``table`` None) the
    whole run's pass alone: a gap no sync can reach passed over, the syncs of the others. ``run``
    has split (or passed over) the gap before ``lo``."""
    ahead = (np.asarray(run._ahead_starts, dtype=np.int64),
             np.asarray([e for _, e in run.ahead] or [0], dtype=np.int64),
             np.asarray(run.unexpected._starts, dtype=np.int64),
             np.sort(np.asarray([w.t1 for w in run.unexpected.items], dtype=np.int64)))
    for b0 in range(lo, hi, BLOCK):
        _block(run, big, b0, min(b0 + BLOCK, hi), inside, first, waited, table, bubbles, syncs, ahead)


def _block(run: Attribution, big: Gaps, b0: int, b1: int, inside: Gaps, first: int, waited: list[bool],
           table: SplitTable, bubbles: BubbleColumns, syncs: BubbleColumns, ahead: tuple[np.ndarray, ...]
           ) -> None:
    ops, prev, nxt = big.ops, big.prev[b0:b1], big.next[b0:b1]
    g0a, g1a, enqa = ops.t1[prev], ops.t0[nxt], ops.enqueued[nxt]
    ea = np.minimum(np.maximum(enqa, g0a), g1a)
    # where each gap's chain starts: the last gap's enqueue, or where the host was ahead since
    # (``Attribution._regained``; the gap before each is the one before it in ``big``: every gap
    # is split, and each leaves its enqueue)
    since = np.r_[run._last[0], g1a[:-1]]
    last_enq = np.r_[run._last[1], np.minimum(enqa, ea)[:-1]]
    starts, ahead_enq = ahead[:2]
    a_lo, a_hi = np.searchsorted(starts, since, side="right"), np.searchsorted(starts, g1a, side="left")
    regained = a_hi > a_lo
    chain_from = np.where(regained, ahead_enq[np.maximum(a_hi - 1, 0)], last_enq)
    a = np.minimum(chain_from, g0a)
    cuts = run._timeline.cuts
    i0, k0, i1 = cuts.searchsorted(a + 1), cuts.searchsorted(g0a + 1), cuts.searchsorted(ea)
    c0, c1 = (int(i0.min()), int(i1.max())) if len(i0) else (0, 0)
    cut = cuts[c0:c1].tolist()
    code = run._timeline.code[c0:c1 + 1].tolist()
    labels = run._timeline.labels
    first_step = (ops.step[nxt] != ops.step[prev]).tolist()
    one = ((ops.enqueued[prev] == enqa) & (enqa != 0)).tolist() if run.graphs else [False] * (b1 - b0)
    L = run.launch
    launch_first = L.step_start if L.step_start is not None else L.within_step
    launch_later = L.within_step if L.within_step is not None else L.step_start
    steps = ops.step[nxt].tolist()
    window = table is not None
    if window:
        w_lo, w_hi = inside.t0[b0 - first:b1 - first].tolist(), inside.t1[b0 - first:b1 - first].tolist()
    s_lo, s_hi, full = big.t0[b0:b1].tolist(), big.t1[b0:b1].tolist(), big.full_ns[b0:b1].tolist()
    index, slack, charged = run.unexpected, run.slack, run._charged
    # whether a wait reaches the gap's host-late part (starts before its end, ends after its start
    # less the slack: all with a positive length, so those that end by then started by then too):
    # the index is asked only then
    w_t0, w_t1 = ahead[2:]
    maybe = (np.searchsorted(w_t0, ea, side="left") > np.searchsorted(w_t1, g0a - slack - 1, side="right")).tolist()
    if window:
        chains, device, shared, queued = table.chain, table.device, table.shared, table._queued
    slot: dict[int, Any] = {}   # per label code, its chain's columns in the table (False: a device row)
    # the lane's gaps' columns, appended to the table's and the bubbles' before any other gap's and at the end
    cols = ([], [], [], [], [], [])
    win, sync_cols = ([], [], [], []), ([], [], [], [])
    win_codes, sync_codes = bubbles._codes if window else {}, syncs._codes

    def flush() -> None:
        if window:
            for out, got in zip((table.inside, table.full, table.late, table.regained, table.tail, table.launch),
                                cols):
                out.extend(got)
                got.clear()
        for out, got in ((bubbles, win), (syncs, sync_cols)) if window else ((syncs, sync_cols),):
            for column, values in zip((out.t0, out.t1, out.step, out.row), got):
                column.extend(values)
                values.clear()

    carry, last = run._carry, run._last
    for j, (g0, g1, enq, e, reg, x0, xk, x1, at, w) in enumerate(zip(
            g0a.tolist(), g1a.tolist(), enqa.tolist(), ea.tolist(), regained.tolist(), i0.tolist(), k0.tolist(),
            i1.tolist(), a.tolist(), waited[b0:b1])):
        s = _lane(carry, g0, g1, e, reg, w, x0 - c0, xk - c0, x1 - c0, cut, code, labels, at)
        if s is None:       # the general rules, from the same state, as ``shared_splits`` read them
            flush()
            run._carry, run._last = carry, last
            i = b0 + j
            p, n = ops.record(int(big.prev[i])), ops.record(int(big.next[i]))
            if window:
                s = run.split(p, n, w)
                table.add(Gap(w_lo[j], w_hi[j], p, n, full[j]), s)
                bubbles.add_parts(s.parts, w_lo[j], w_hi[j], steps[j])
            else:
                s = None if run.passed_syncless(p, n) else run.split(p, n, w)
            if s is not None:
                syncs.add_parts([q for q in s.parts if q.cause == SYNC], s_lo[j], s_hi[j], steps[j])
            carry, last = run._carry, run._last
            continue
        chain, host, left = s
        site = carry.site   # the sync's part is the carried site's whatever carries on after it
        carry = Carry(site, left) if left > 0 else None
        if maybe[j]:
            for wt in [x for x in index.overlapping_list(g0 - slack - 1, e) if x not in charged]:
                charged.add(wt)
                own = min(e, wt.t1) - max(g0, wt.t0) if wt.site == site and g0 < wt.t1 and e > wt.t0 else 0
                if wt.t1 - wt.t0 - own > 0:
                    carry = Carry(wt.site, wt.t1 - wt.t0 - own)
        launch = None if one[j] else (launch_first if first_step[j] else launch_later)
        x = e       # (conditional expressions, not min and max: a few million calls at a million spans)
        if e < g1 and launch is not None:
            end = g1 - (g1 - e if g1 - e < launch else launch)
            left = carry.left_ns if carry is not None and carry.site == site else 0
            took = end - e if end - e < left else left
            if took > 0:        # ``_spend``
                carry = Carry(site, carry.left_ns - took) if carry.left_ns > took else None
            x = e + took
        last = (g1, enq if enq < e else e)
        step = steps[j]
        if window:      # ``SplitTable.add`` and the window's ``add_parts``, in their order
            i = len(table.full) + len(cols[1])
            lo_, hi_ = w_lo[j], w_hi[j]
            cols[0].append((hi_ - lo_) / full[j])
            cols[1].append(full[j])
            cols[2].append(e - g0)
            cols[3].append(False)
            cols[4].append(0)
            cols[5].append(NONE if launch is None else launch)
            for c, ns in chain.items():
                to = slot.get(c)
                if to is None:      # first met: the table's row made now, as ``SplitTable.add`` makes it
                    key = labels[c][:2]
                    q = queued.get(key[0])
                    to = slot[c] = False if (table._is_queued(key[0]) if q is None else q) else chains[key]
                if to:
                    to[0].append(i)
                    to[1].append(ns)
            detail = GRAPH_NODES if launch is None and one[j] else LAUNCH_LATENCY
            if x < g1:
                idx, val = device[(DISPATCH, detail)]
                idx.append(i)
                val.append(g1 - x)
            for t0, t1, why in host:
                if not why.startswith(OUTSIDE_PHASES):
                    p0, p1 = t0 if t0 > lo_ else lo_, t1 if t1 < hi_ else hi_
                    if p0 < p1:
                        shared[(HOST, why)] += p1 - p0
            # the parts: the sync's [g0, x), then dispatch's [x, g1) (``_add``, written out: three a gap)
            p0, p1 = g0 if g0 > lo_ else lo_, x if x < hi_ else hi_
            if p0 < p1:
                c = win_codes.get((SYNC, site))
                if c is None:
                    c = win_codes[(SYNC, site)] = len(win_codes)
                win[0].append(p0)
                win[1].append(p1)
                win[2].append(step)
                win[3].append(c)
            if x < g1:
                _add(win, win_codes, x, g1, lo_, hi_, step, DISPATCH, detail)
        lo_, hi_ = s_lo[j], s_hi[j]
        p0, p1 = g0 if g0 > lo_ else lo_, x if x < hi_ else hi_
        if p0 < p1:
            c = sync_codes.get((SYNC, site))
            if c is None:
                c = sync_codes[(SYNC, site)] = len(sync_codes)
            sync_cols[0].append(p0)
            sync_cols[1].append(p1)
            sync_cols[2].append(step)
            sync_cols[3].append(c)
    flush()
    run._carry, run._last = carry, last


def _add(out: tuple[list, list, list, list], codes: dict, t0: int, t1: int, lo: int, hi: int, step: int, cause: Any,
         detail: str) -> None:
    """``BubbleColumns.add_parts`` of one part, into lists of its columns."""
    a, b = max(t0, lo), min(t1, hi)
    if a < b:
        key = (cause, detail)
        c = codes.get(key)
        if c is None:
            c = codes[key] = len(codes)
        out[0].append(a)
        out[1].append(b)
        out[2].append(step)
        out[3].append(c)


def _lane(carry, g0, g1, e, regained, waited, x0, xk, x1, cut, code, labels, a):
    """``carried_split``'s conditions and its charge of the host-late part, on the timeline's
    stretches: (the chain per label code, the host-work stretches, what is left of the charge), or None."""
    if carry is None or e <= g0 or regained or (e < g1 and waited):
        return None
    # the chain: [a, e) per row in order of first use; the host-late part: the stretches from g0's on
    chain: dict[int, int] = {}     # per label code (one per row: no label here carries counters)
    host = []
    site, left = carry.site, carry.left_ns
    start = a
    for k in range(x0, x1 + 1):
        end = cut[k] if k < x1 else e
        c = code[k]
        chain[c] = chain.get(c, 0) + end - start
        cause, detail = labels[c][:2]
        if k >= xk:
            if cause == HOST:
                t0 = start if start > g0 else g0
                left -= end - t0
                if host and host[-1][1] == t0 and host[-1][2] == detail:
                    host[-1] = (host[-1][0], end, detail)
                else:
                    host.append((t0, end, detail))
            elif cause != SYNC or detail != site:
                return None
        start = end
    if left < 0:
        return None
    return chain, host, left
