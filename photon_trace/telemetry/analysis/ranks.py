"""A distributed job, rank by rank and across ranks: where its idle lives.

``analyze_ranks(trace)`` takes a job merged into one trace (``telemetry/trace/ranks.py``) and
gives, per rank, the analysis every single trace gets (``analyze``: idle, syncs, diagnosis)
and its computation–communication overlap; across ranks:

* **per step, the slowest rank**: each rank's step time (its step annotation's span, else its
  device ops' extent in that step) less what it spent in that step waiting in collectives for
  the others: its own work. Collectives make every rank's step last as long as the slowest's,
  so the step times alone cannot say who held the others; the rank with the most work can;
* **per collective**, how long each rank's kernel waited for the last rank to arrive against
  its transfer time (``collectives.py``), and per rank those summed;
* **computation–communication overlap** per rank as Holistic Trace Analysis defines it: the
  time communication kernels ran while a computation kernel ran too, over the communication
  kernels' time (both as unions of their intervals; memcpy, memset and sync kernels are
  neither);
* **the clocks' agreement**: what the files say (one host: one clock), and what the job shows:
  the median spread of the collectives' ends, which bounds the offset between two ranks'
  clocks (a collective ends on every rank at about one moment).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from photon_trace.telemetry.analysis.collectives import (
    Collective, RankWaits, end_spread_ns, is_comm_kernel, match_collectives, rank_waits)
from photon_trace.telemetry.analysis.diagnosis import ranked
from photon_trace.telemetry.analysis.report import Report, analyze
from photon_trace.telemetry.analysis.source_notes import unknown_runtime
from photon_trace.telemetry.analysis.window import steady_state_window
from photon_trace.telemetry.trace.ranks import split_ranks
from photon_trace.telemetry.trace.records import Trace


class RankRow(NamedTuple):
    rank: int
    file: str
    device_ops: int
    idle_fraction: float | None      # of its analysed stream over its window (None: no device ops)
    syncs: int | None                # accidental syncs in the whole trace (None: its runtime is unknown)
    first_fix: str                   # the first row of its ranked diagnosis
    overlap: float | None            # computation–communication overlap (None: no communication kernel)


class StepRow(NamedTuple):
    step: int
    durations: dict[int, int]        # rank -> its time in this step
    work: dict[int, int]             # rank -> that time less its waits in collectives for the others
    slowest: int                     # the rank with the most work: the one the others waited for
    spread_ns: int                   # its work minus the least of any rank


@dataclass
class RanksReport:
    ranks: list[RankRow]
    reports: dict[int, Report | None]
    steps: list[StepRow]
    collectives: list[Collective]
    waits: list[RankWaits]
    unmatched: dict[str, int]
    alignment: dict[str, Any] = field(default_factory=dict)

    def alignment_text(self) -> str:
        """How the ranks' clocks were aligned, and how well they agree, in one line."""
        a = self.alignment
        clocks = "; ".join(a.get("clocks") or []) or "unknown clocks"
        if a.get("same_host"):
            said = f"one host ({', '.join(a.get('hosts') or [])}): one clock, to {_dur(a.get('error_ns'))}"
        elif a.get("same_host") is False:
            said = f"{len(a.get('hosts') or [])} hosts: the offset between their clocks is not in the files"
        else:
            said = "the files do not name their hosts: the offset between their clocks is not in the files"
        measured = a.get("measured_ns")
        shown = (f"; the all-rank collectives end within {_dur(measured)} of each other (median), which bounds it"
                 if measured is not None else "; no all-rank collective to measure it by")
        return f"clocks: aligned on {clocks}; {said}{shown}"

    @property
    def error_ns(self) -> int | None:
        """How far two ranks' times may disagree: the files' word (one host), else the collectives' ends."""
        a = self.alignment
        return a.get("error_ns") if a.get("error_ns") is not None else a.get("measured_ns")


def _dur(ns: int | None) -> str:
    if ns is None:
        return "unknown"
    return f"{ns:,} ns" if ns < 1000 else f"{ns / 1e3:,.1f} µs"


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _intersection(x: list[tuple[int, int]], y: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        total += max(0, b - a)
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return total


def is_compute_kernel(name: str) -> bool:
    """A computation kernel as HTA counts one: no communication, copy, set or sync kernel."""
    return not (is_comm_kernel(name) or "Memcpy" in name or name.startswith("Memset") or "Sync" in name)


def comm_comp_overlap(trace: Trace, window: tuple[int, int] | None = None) -> float | None:
    """The share of communication-kernel time during which a computation kernel ran too (HTA's
    ``get_comm_comp_overlap``), over ``window`` (the whole trace when None); None without any."""
    ops = trace.device_spans if window is None else [d for d in trace.device_spans
                                                     if d.t1 > window[0] and d.t0 < window[1]]
    comm = _union([(d.t0, d.t1) for d in ops if is_comm_kernel(d.op)])
    comp = _union([(d.t0, d.t1) for d in ops if is_compute_kernel(d.op)])
    total = sum(b - a for a, b in comm)
    return _intersection(comm, comp) / total if total else None


def step_times(trace: Trace) -> dict[int, tuple[int, int]]:
    """Each step's (start, end) on a rank: its step annotation's span, else its device ops' extent."""
    name = (trace.header.get("settings") or {}).get("step_annotation") or ""
    out: dict[int, tuple[int, int]] = {}
    for h in trace.host_spans:
        if h.step >= 0 and name and (h.phase == name or h.phase.startswith(name + "#")):
            out[h.step] = (h.t0, h.t1)
    if out:
        return out
    for d in trace.device_spans:
        if d.step >= 0:
            a, b = out.get(d.step, (d.t0, d.t1))
            out[d.step] = (min(a, d.t0), max(b, d.t1))
    return out


def slowest_per_step(ranks: list[tuple[int, Trace]], collectives: list[Collective]) -> list[StepRow]:
    """Per step that two ranks or more ran: each rank's time in it, its work (that time less its
    collective waits that began in the step) and the rank with the most work."""
    times = {r: step_times(t) for r, t in ranks}
    steps = sorted(set().union(*[set(v) for v in times.values()])) if times else []
    rows = []
    for s in steps:
        spans = {r: v[s] for r, v in times.items() if s in v}
        if len(spans) < 2:
            continue
        d = {r: b - a for r, (a, b) in spans.items()}
        # waits may overlap (a rank's buckets all-reduced at once): their union, inside the step
        waited = {r: sum(min(y, b) - max(x, a) for x, y in _union(
                     [(c.starts[r], c.starts[r] + c.wait_ns(r)) for c in collectives if r in c.starts])
                     if min(y, b) > max(x, a))
                  for r, (a, b) in spans.items()}
        work = {r: d[r] - waited[r] for r in d}
        slowest = max(work, key=lambda r: (work[r], -r))
        rows.append(StepRow(s, d, work, slowest, work[slowest] - min(work.values())))
    return rows


def _first_fix(report: Report | None) -> str:
    if report is None or not report.diagnosis:
        return "—"
    d = ranked(report.diagnosis)[0]
    return f"{d.cause} at {d.site_or_phase} ({d.idle_ns / 1e6:.3f} ms)"


def analyze_ranks(trace: Trace, *, analyze_one: Callable[[Trace], Report] = analyze) -> RanksReport:
    """The job's analysis (see the module docstring); ``trace`` merged by ``merge_ranks``."""
    ranks = split_ranks(trace)
    files = {e["rank"]: e["file"] for e in trace.header.get("ranks") or []}
    reports: dict[int, Report | None] = {}
    rows = []
    for r, t in ranks:
        reports[r] = analyze_one(t) if t.device_spans else None
        window = steady_state_window(t) if t.device_spans else None
        syncs = None if unknown_runtime(t) else sum(1 for w in t.waits if not w.expected)
        rows.append(RankRow(r, files.get(r, ""), len(t.device_spans),
                            reports[r].idle_fraction if reports[r] is not None else None, syncs,
                            _first_fix(reports[r]), comm_comp_overlap(t, window)))
    collectives, unmatched = match_collectives(ranks)
    alignment = dict(trace.header.get("alignment") or {})
    alignment["measured_ns"] = end_spread_ns(collectives)
    return RanksReport(rows, reports, slowest_per_step(ranks, collectives), collectives, rank_waits(collectives),
                       unmatched, alignment)
