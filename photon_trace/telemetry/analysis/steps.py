"""Per-step costs: the cost model's terms measured step by step.

* ``forward_ns``: compute ops that run the model (stage, prefill, forward); in an
  imported trace, whose ops are kernels of any name, every op on the stream.
* ``sample_ns``: compute ops that sample (sample, masked_sample).
* ``copy_ns``: the step's ops on the other streams (our copy stream: copy-back, mask
  upload); they overlap compute, so they are not part of the period's busy time.
* ``period_ns``: from the step's first compute op to the next step's (the last
  step of a trace: to its last compute op's end).
* ``bookkeeping_ns``: the host's top-level phases (plan, launch, commit,
  finalize; ``trace.lanes.host_phases``) recorded for the step, less the host waits of that step inside them:
  waiting is the device's time, not the host's work.
* ``idle_ns``: the part of the period with no compute op running (every gap,
  bubbles and dispatch gaps alike) while the engine had work (``report`` passes the gaps
  with their no work cut out), so the steps' idle adds up to the window's.
"""
from __future__ import annotations

from statistics import median
from typing import NamedTuple

import numpy as np

from photon_trace.telemetry.analysis.gaps import Gaps, stream_mask
from photon_trace.telemetry.analysis.runs import Runs, per_group
from photon_trace.telemetry.analysis.window import _primary, prefill_steps, step_starts
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.lanes import host_phases, primary_stream
from photon_trace.telemetry.trace.records import Trace

FORWARD_OPS = frozenset({"stage", "prefill", "forward"})
SAMPLE_OPS = frozenset({"sample", "masked_sample"})


class StepStats(NamedTuple):
    step: int
    kind: str
    rows: int
    forward_ns: int
    sample_ns: int
    period_ns: int
    bookkeeping_ns: int
    idle_ns: int
    copy_ns: int
    zombie_rows: int
    tokens: int


def step_periods(trace: Trace) -> list[tuple[int, int, int]]:
    """``(step, start, period_ns)`` for every step that ran on the compute stream, in time order."""
    starts = step_starts(trace)
    if not starts:
        return []
    t1, step = _primary(trace, "t1", "step")
    steps, last_end = per_group(step, t1, np.maximum)
    t0 = [t for t, _ in starts]
    ends = t0[1:] + [int(last_end[np.searchsorted(steps, starts[-1][1])])]
    return [(s, a, b - a) for (a, s), b in zip(starts, ends)]


def _by_step(steps: np.ndarray, value: np.ndarray, at: np.ndarray) -> list[int]:
    """Per step of ``at``: ``value`` summed over its ``steps`` (0 for none), looked up as arrays:
    a dict per sum held a Python int pair per step, a million steps at ten million spans."""
    g, total = per_group(steps, value)
    if not len(g) or not len(at):
        return [0] * len(at)
    i = np.minimum(np.searchsorted(g, at), len(g) - 1)
    return np.where(g[i] == at, total[i], 0).tolist()


def _waited_in_phases(phase_step: np.ndarray, h0: np.ndarray, h1: np.ndarray, waits: list) -> dict[int, int]:
    """Per step: its waits' time inside its phases, each phase counted on its own (nested phases
    twice), as the sum over pairs of overlaps. The overlap of [a, b) with all of a step's phases is
    F(b) - F(a), F(x) being the time before x inside each phase: sum over starts before x of
    (x - start) less the same over ends. Every step at once (a loop per step was 14 s of a
    million-span trace): each phase's times relative to its step's first start, keyed
    ``step rank * span + time``, so one ``searchsorted`` finds each wait's place among its own
    step's starts (or ends), and prefix sums give the sums before it."""
    out: dict[int, int] = {}
    if not waits or not len(h0):
        return out
    ok = h1 >= h0       # a phase that ends before it starts overlaps nothing
    phase_step, h0, h1 = phase_step[ok], h0[ok], h1[ok]
    if not len(h0):
        return out
    steps, base = per_group(phase_step, h0, np.minimum)    # each step's first phase start
    rank = np.searchsorted(steps, phase_step)
    rel0, rel1 = h0 - base[rank], h1 - base[rank]
    span = int(rel1.max()) + 2      # beyond every relative time
    if len(h0) * span >= 1 << 62:   # the keys (and their prefix sums) would overflow
        return _waited_step_by_step(phase_step, h0, h1, waits)
    w_step = column(waits, "step")
    w_rank = np.minimum(np.searchsorted(steps, w_step), len(steps) - 1)
    mine = steps[w_rank] == w_step      # a wait of a step with no phase overlaps none
    w_step, w_rank = w_step[mine], w_rank[mine]
    a, b = column(waits, "t0")[mine] - base[w_rank], column(waits, "t1")[mine] - base[w_rank]
    starts, ends = _Before(rel0, rank, span, w_rank), _Before(rel1, rank, span, w_rank)
    inside = np.where(b > a, (starts(b) - ends(b)) - (starts(a) - ends(a)), 0)
    g, total = per_group(w_step, inside)
    return dict(zip(g.tolist(), total.tolist()))


class _Before:
    """For points each in a step: sum over the step's ``times`` before the point x of (x - time)."""

    def __init__(self, times: np.ndarray, rank: np.ndarray, span: int, at_rank: np.ndarray):
        key = rank * span + times
        order = np.argsort(key, kind="stable")
        self.key, self.span = key[order], span
        self.cum = np.concatenate([[0], np.cumsum(times[order])])
        self.rank = at_rank
        self.lo = np.searchsorted(self.key, at_rank * span)     # where each point's step begins

    def __call__(self, x: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.key, self.rank * self.span + np.clip(x, 0, self.span - 1))
        return (at - self.lo) * x - (self.cum[at] - self.cum[self.lo])


def _waited_step_by_step(phase_step: np.ndarray, h0: np.ndarray, h1: np.ndarray, waits: list) -> dict[int, int]:
    """``_waited_in_phases`` one step at a time, for times too far apart to key by step."""
    out: dict[int, int] = {}
    order = np.argsort(phase_step, kind="stable")
    ps = phase_step[order]
    by_step: dict[int, list] = {}
    for w in waits:
        by_step.setdefault(w.step, []).append(w)
    for step, ws in by_step.items():
        lo, hi = np.searchsorted(ps, step), np.searchsorted(ps, step, side="right")
        if lo == hi:
            continue
        base = int(h0[order[lo:hi]].min())
        starts, ends = np.sort(h0[order[lo:hi]] - base), np.sort(h1[order[lo:hi]] - base)
        cs, ce = np.concatenate([[0], np.cumsum(starts)]), np.concatenate([[0], np.cumsum(ends)])

        def before(x: np.ndarray) -> np.ndarray:
            i, j = np.searchsorted(starts, x), np.searchsorted(ends, x)
            return (i * x - cs[i]) - (j * x - ce[j])

        a = np.array([w.t0 for w in ws], dtype=np.int64) - base
        b = np.array([w.t1 for w in ws], dtype=np.int64) - base
        out[step] = int(np.where(b > a, before(b) - before(a), 0).sum())
    return out


def step_stats(trace: Trace, window: tuple[int, int], gaps: Gaps | list) -> list[StepStats]:
    """One row per step whose first compute op starts inside ``window`` (``gaps``: the compute
    stream's, disjoint and in time order)."""
    w0, w1 = window
    records = {r.step: r for r in trace.steps}
    spans = trace.device_spans
    stream = primary_stream(trace)
    primary = stream_mask(spans, stream)
    op, table = codes(spans, "op")
    op = np.asarray(op)
    sample = np.isin(op, [i for i, name in enumerate(table) if name in SAMPLE_OPS]) & primary
    periods = [p for p in step_periods(trace) if w0 <= p[1] < w1]
    at = np.array([p[0] for p in periods], dtype=np.int64)
    step, length = column(spans, "step"), column(spans, "t1") - column(spans, "t0")
    cpy = _by_step(step[~primary], length[~primary], at)
    smp = _by_step(step[sample], length[sample], at)
    model = primary & ~sample   # the model's ops, and every op of an imported trace
    fwd = _by_step(step[model], length[model], at)
    saw_prefill = set(prefill_steps(trace).tolist())

    phase, names = codes(trace.host_spans, "phase")
    top = host_phases(trace)
    mine = np.isin(np.asarray(phase), [i for i, name in enumerate(names) if name in top])
    h_step = column(trace.host_spans, "step")[mine] if len(mine) else np.empty(0, np.int64)
    h0 = column(trace.host_spans, "t0")[mine] if len(mine) else np.empty(0, np.int64)
    h1 = column(trace.host_spans, "t1")[mine] if len(mine) else np.empty(0, np.int64)
    book = _by_step(h_step, h1 - h0, at)
    waited = _waited_in_phases(h_step, h0, h1, trace.waits)
    t0 = np.array([p[1] for p in periods], dtype=np.int64)
    g0, g1 = (gaps.t0, gaps.t1) if isinstance(gaps, Gaps) else ([g.t0 for g in gaps], [g.t1 for g in gaps])
    idle = Runs(g0, g1).within(t0, t0 + np.array([p[2] for p in periods], dtype=np.int64)).tolist()
    rows = []
    for (step, t0, period), idle_ns, fwd_ns, smp_ns, cpy_ns, book_ns in zip(periods, idle, fwd, smp, cpy, book):
        r = records.get(step)
        kind = r.kind if r else ("prefill" if step in saw_prefill else "decode")
        rows.append(StepStats(
            step=step, kind=kind, rows=r.rows if r else 0,
            forward_ns=fwd_ns, sample_ns=smp_ns, period_ns=period,
            bookkeeping_ns=max(0, book_ns - waited.get(step, 0)), idle_ns=idle_ns, copy_ns=cpy_ns,
            zombie_rows=r.zombie_rows if r else 0, tokens=r.tokens if r else 0))
    return rows


def median_ms(steps: list[StepStats], field: str) -> float:
    """Median of a StepStats field in ms, over decode steps when there are any (the source's tables)."""
    decode = [s for s in steps if s.kind == "decode"] or steps
    return median(getattr(s, field) for s in decode) / 1e6 if decode else 0.0
