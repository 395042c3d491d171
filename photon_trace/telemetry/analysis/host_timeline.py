"""The host's whole timeline cut where what covers it changes, each stretch labelled by precedence.

``attribution`` charges a gap's host-late time to what the host was doing then: an unexpected
wait, else an expected one, else a top-level phase, else any other host span ("outside
phases"), else nothing recorded. Among covers of one kind the latest to start wins (the
innermost); among equals, the first in the trace. This module labels every stretch between
two consecutive cover edges once per trace.

A sweep over the edges with the active covers in a list is a Python loop per edge (two per
host span). Instead each cover gets a priority (its precedence as one integer) and the label
of a stretch is the best priority among the covers over it: a "minimum over ranges" that a
segment tree answers for all covers at once, level by level, in numpy (``_range_min``):
O(n log n) array work and no Python per span. ``Timeline.stretches`` reads a range back.
"""
from __future__ import annotations

from collections.abc import Sequence
import numpy as np

from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.analysis.gap_parts import Part
from photon_trace.telemetry.analysis.host_running import PhaseCounters, Running, of_wait
from photon_trace.telemetry.analysis.runs import first_of_each, per_group
from photon_trace.telemetry.trace.columns import codes, column
from photon_trace.telemetry.trace.distinct import distinct
from photon_trace.telemetry.trace.records import HostSpan, HostWait
from photon_trace.telemetry.tracer import NO_WORK, SUB_PHASES

OUTSIDE_PHASES = "outside phases"
"""``host_bound``'s detail for host time no top-level phase covers."""
OUTSIDE = (Cause.HOST_BOUND, OUTSIDE_PHASES, None)
Label = tuple[Cause, str, Running | None]
_FEW = 400   # edges in a range up to which a Python loop beats numpy's per-call cost (~600 measured)


def outside_detail(enclosing: str | None) -> str:
    return OUTSIDE_PHASES if enclosing is None else f"{OUTSIDE_PHASES} (in {enclosing})"


def _range_min(k: int, lo: np.ndarray, hi: np.ndarray, value: np.ndarray, empty: int) -> np.ndarray:
    """For each point 0..k-1, the least ``value[j]`` over the ranges [lo[j], hi[j]) holding it
    (``empty`` where none does): a bottom-up segment tree, every range a level at a time."""
    size = 1 << max(1, (k - 1).bit_length())
    # int32 where the values fit: the tree is 2**25 nodes for ten million spans' edges, and its
    # push-down makes copies of its levels
    kind = np.int32 if max(empty, int(value.max(initial=0))) < np.iinfo(np.int32).max else np.int64
    tree = np.full(2 * size, empty, dtype=kind)
    keep = lo < hi
    left, right, value = lo[keep] + size, hi[keep] + size, value[keep].astype(kind)
    while len(left):
        odd = (left & 1).astype(bool)
        np.minimum.at(tree, left[odd], value[odd])
        left = left + odd
        odd = (right & 1).astype(bool)
        right = right - odd
        np.minimum.at(tree, right[odd], value[odd])
        left, right = left >> 1, right >> 1
        keep = left < right
        left, right, value = left[keep], right[keep], value[keep]
    width = 1
    while width < size:     # push each node's value down to its two children
        parents = tree[width:2 * width]
        tree[2 * width:4 * width] = np.minimum(tree[2 * width:4 * width], np.repeat(parents, 2))
        width *= 2
    return tree[size:size + k]


class Timeline:
    """``cuts``: every cover edge in time order; the stretch [cuts[i-1], cuts[i]) has label
    ``labels[code[i]]`` (``code[0]``: before the first edge; code 0 is ``OUTSIDE``, nothing recorded)."""

    __slots__ = ("cuts", "code", "labels", "counted", "some_counted")

    def __init__(self, t0: np.ndarray, t1: np.ndarray, priority: np.ndarray, label: np.ndarray,
                 labels: list[Label]):
        self.cuts = distinct(np.concatenate([t0, t1])) if len(t0) else np.empty(0, np.int64)
        lo, hi = np.searchsorted(self.cuts, t0), np.searchsorted(self.cuts, t1)
        n = len(t0)
        best = _range_min(len(self.cuts), lo, hi, priority, n) if n else np.empty(0, np.int64)
        by_priority = np.empty(n + 1, dtype=np.int64)     # priority -> label code; n: none (OUTSIDE)
        by_priority[priority] = label
        by_priority[n] = 0
        self.code = np.concatenate([[0], by_priority[best]]).astype(np.int64)
        self.labels = labels
        self.counted = np.array([label[2] is not None for label in labels], dtype=bool)
        self.some_counted = bool(self.counted.any())

    def _span(self, a: int, b: int) -> tuple[int, int]:
        """(i0, i1): the edges inside (a, b) are cuts[i0:i1]; code[i0] labels [a, the first). One
        search for both (the edges are integers: after ``a`` is from ``a + 1`` on), once a gap."""
        i0, i1 = self.cuts.searchsorted((a + 1, b)).tolist()
        return i0, i1

    def _merged(self, a: int, b: int, i0: int, i1: int) -> list[list[int]]:
        """[a, b) as [t0, t1, code] stretches, adjacent equal codes merged, in Python: for a range
        of a few edges (a gap between two ops of a step) cheaper than a dozen numpy calls."""
        out: list[list[int]] = []
        x = a
        for y, c in zip(self.cuts[i0:i1].tolist() + [b], self.code[i0:i1 + 1].tolist()):
            if out and out[-1][2] == c:
                out[-1][1] = y
            else:
                out.append([x, y, c])
            x = y
        return out

    def summed(self, a: int, g0: int, b: int) -> tuple[dict[tuple[Cause, str], int], list[Part]] | None:
        """[a, b) as ns per (cause, detail), in order of first use, and its merged stretches as
        parts that end after ``g0``; None where a label carries the thread's counters (its
        stretches are split by them: ``stretches`` then)."""
        if a >= b:
            return {}, []
        i0, i1 = self._span(a, b)
        code = self.code[i0:i1 + 1]
        if self.some_counted and self.counted[code].any():
            return None
        if i1 - i0 > _FEW:
            return self._summed_arrays(a, g0, b, i0, i1, code)
        labels = self.labels
        totals: dict[tuple[Cause, str], int] = {}
        after: list[Part] = []
        codes = code.tolist()
        x, c = a, codes[0]      # the merged stretch [x, ...) of code c, so far
        for y, d in zip(self.cuts[i0:i1].tolist(), codes[1:]):     # code d from y on
            if d != c:
                cause, detail = key = labels[c][:2]
                totals[key] = totals.get(key, 0) + y - x
                if y > g0:
                    after.append(Part(x, y, cause, detail))
                x, c = y, d
        cause, detail = key = labels[c][:2]
        totals[key] = totals.get(key, 0) + b - x
        if b > g0:
            after.append(Part(x, b, cause, detail))
        return totals, after

    def _summed_arrays(self, a: int, g0: int, b: int, i0: int, i1: int, code: np.ndarray
                       ) -> tuple[dict[tuple[Cause, str], int], list[Part]]:
        """``summed`` over many edges (a chain from a gap long before), as arrays."""
        labels = self.labels
        inner = self.cuts[i0:i1]
        starts = np.concatenate([[a], inner])
        ends = np.concatenate([inner, [b]])
        keys, sums = per_group(code, ends - starts)
        first = np.sort(first_of_each(code))
        total_of = dict(zip(keys.tolist(), sums.tolist()))
        begin = np.flatnonzero(np.append(True, code[1:] != code[:-1]))     # the merged stretches
        finish = np.append(begin[1:], len(code)) - 1
        late = np.flatnonzero(ends[finish] > g0)
        after = [Part(x, y, *labels[c][:2]) for x, y, c in
                 zip(starts[begin[late]].tolist(), ends[finish[late]].tolist(), code[begin[late]].tolist())]
        return {labels[c][:2]: total_of[c] for c in code[first].tolist()}, after

    def stretches(self, a: int, b: int) -> list[tuple[int, int, Label]]:
        """[a, b) as (t0, t1, label) stretches, adjacent equal labels merged."""
        if a >= b:
            return []
        labels = self.labels
        return [(x, y, labels[c]) for x, y, c in self._merged(a, b, *self._span(a, b))]


def host_timeline(host_spans: Sequence[HostSpan], waits: list[HostWait], phases: frozenset[str],
                  landed: dict[int, int], slack_ns: int, skip_no_work: bool) -> Timeline:
    """The timeline of what covers host time (module docstring): ``waits`` (of positive length)
    first, then the host spans: top-level ``phases`` as themselves, any other span but a
    sub-phase as "outside phases (in it)", ``no_work`` spans left out when ``skip_no_work``. A
    span with the thread's counters (a phase; the server loop's ``serve`` between ticks) carries
    them in its label, to be split by whether the host ran."""
    labels: list[Label] = [OUTSIDE]
    seen: dict[Label, int] = {OUTSIDE: 0}

    def code(label: Label) -> int:
        c = seen.get(label)
        if c is None:
            c = seen[label] = len(labels)
            labels.append(label)
        return c

    w_t0 = np.array([w.t0 for w in waits], dtype=np.int64)
    w_t1 = np.array([w.t1 for w in waits], dtype=np.int64)
    w_cls = np.array([1 if w.expected else 0 for w in waits], dtype=np.int64)
    w_label = np.array([code((Cause.COMMIT_WAIT if w.expected else Cause.ACCIDENTAL_SYNC, w.site,
                              of_wait(w, landed, slack_ns))) for w in waits], dtype=np.int64)

    phase, table = codes(host_spans, "phase")
    # per distinct name: its class (2 a phase, 3 another span, -1 none) and its label code
    cls_of = np.full(len(table) + 1, -1, dtype=np.int64)
    label_of = np.zeros(len(table) + 1, dtype=np.int64)
    for i, name in enumerate(table):
        if name == NO_WORK and skip_no_work:
            continue        # no host work: cut out of every gap (``attribution``)
        if name in phases:
            cls_of[i], label_of[i] = 2, code((Cause.HOST_BOUND, name, None))
        elif name not in SUB_PHASES:
            cls_of[i], label_of[i] = 3, code((Cause.HOST_BOUND, outside_detail(name), None))
    phase = np.asarray(phase, dtype=np.int64)
    h_t0, h_t1 = column(host_spans, "t0"), column(host_spans, "t1")
    h_cls = cls_of[phase] if len(phase) else np.empty(0, np.int64)
    keep = (h_cls == 2) | ((h_cls == 3) & (h_t1 > h_t0))
    h_label = label_of[phase] if len(phase) else np.empty(0, np.int64)
    counted = np.flatnonzero(keep & (column(host_spans, "cpu_ns") >= 0)) if len(phase) else []
    if len(counted):        # a span with the thread's counters (a phase, the server loop's
        own = PhaseCounters(waits)     # ``serve``): its own label, split by them (``host_running``)
        h_label = h_label.copy()
        for i in np.asarray(counted).tolist():
            h = host_spans[i]
            h_label[i] = code((*labels[h_label[i]][:2], own.of(h)))
    mine = np.flatnonzero(keep)
    t0 = np.concatenate([w_t0, h_t0[mine]])
    t1 = np.concatenate([w_t1, h_t1[mine]])
    cls = np.concatenate([w_cls, h_cls[mine]])
    label = np.concatenate([w_label, h_label[mine]])
    # precedence: the lower class, then the later start, then the first listed
    order = np.lexsort((np.arange(len(t0)), -t0, cls))
    priority = np.empty(len(t0), dtype=np.int64)
    priority[order] = np.arange(len(t0))
    return Timeline(t0, t1, priority, label, labels)
