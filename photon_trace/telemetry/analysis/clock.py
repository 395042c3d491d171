"""How far a trace's device times can be off the host clock, and a check against CUPTI's.

A backend places device timestamps on the host's monotonic clock; the header's
``clock`` says how well. ``device_error_ns``: half the host bracket of the
anchor event, taken while the device was idle at the start of the run;
``drift_ns``: where the anchor put an idle event at the run's end against the
host's bracket of it, within ``drift_error_ns`` (both brackets and the float32
step of CUDA's elapsed time, ``resolution_ns``). The host-process device stamps
the host's own clock: every figure is 0.

``compare_with_cupti`` checks our event-based device spans against an
independent clock: the kernels, copies and memsets CUPTI recorded (through
``torch.profiler``) in the same run, after one constant offset (the median over
forwards: Kineto's clock against ours, plus the event-to-kernel latency, which no
comparison can tell apart) is taken out. An event is stamped when the stream
reaches it: after the work before it, and before the work after it begins. So
each forward's begin event must fall between the end of the stream's last
activity before the forward and the forward's first kernel, and its end event
between the forward's last activity and the next one, within a tolerance. Where
the stream was busy up to the edge (the steady, graphed decode) that interval is
a few microseconds wide and the check is tight; where the stream sat idle (a host
that enqueued the event late, as eager prefill does) it is wide, and the device
idle between our edge and CUPTI's kernel lies inside our span: counted apart
(``edge_idle``), as is every CUPTI gap inside our spans (``hidden``). Neither is
a clock error: both are idle that two events around an op call busy. Each gap of
ours must be idle in CUPTI's records too, but for device work our events do not
bracket (``unbracketed_ns``).

Measured on an H200 (1.5b, bf16, 8 streams; docs/gpu.md): in the three runs the
profiler left alone, starts within 0.7-4.6 us and ends within 0.7-5.2 us at the
median, every edge inside its interval within 10 us; the two eager prefills held
584-1,111 gaps (22-62 ms). A run the profiler slowed is UNDECIDED (``undecided``).
"""
from __future__ import annotations

import bisect
import itertools
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from photon_trace.telemetry.trace.records import COMPUTE_OPS, Trace

TOLERANCE_NS = 10_000        # per forward start/end and per bubble edge, after the offset
MIN_GAP_NS = 20_000          # bubbles compared: the analysis's threshold (bubbles.MIN_BUBBLE_NS)
PERTURBED = 1.10             # profiled forward over the unprofiled one: the profiler changed the run
FORWARD_OPS = ("prefill", "forward")


def clock_error_ns(header: dict) -> int:
    """A bound on any device time's error in the trace: the anchor's, or, when the drift
    was measured at the run's end, the drift plus its own bound (which includes it)."""
    c = header.get("clock") or {}
    anchor = int(c.get("device_error_ns", 0) or 0)
    if "drift_ns" not in c:
        return anchor
    return max(anchor, abs(int(c.get("drift_ns") or 0)) + int(c.get("drift_error_ns") or 0))


class Activity(NamedTuple):
    """One CUPTI record: a kernel, memcpy or memset on a device stream, unix ns."""
    t0: int
    t1: int
    stream: int
    kind: str


def kineto_activities(chrome: dict) -> list[Activity]:
    """The GPU activities of a ``torch.profiler`` Chrome trace (``export_chrome_trace``):
    ``ts``/``dur`` in microseconds, relative to ``baseTimeNanoseconds`` when present."""
    base = int(chrome.get("baseTimeNanoseconds", 0) or 0)
    out = []
    for e in chrome.get("traceEvents", ()):
        kind = e.get("cat")
        if kind not in ("kernel", "gpu_memcpy", "gpu_memset") or e.get("ph") != "X":
            continue
        t0 = base + round(float(e["ts"]) * 1000)
        out.append(Activity(t0, t0 + round(float(e.get("dur", 0)) * 1000), int(e.get("args", {}).get("stream", -1)),
                            kind))
    return sorted(out)


def _gaps(spans: list[tuple[int, int]], min_gap: int) -> list[tuple[int, int]]:
    """Idle gaps of at least ``min_gap`` between intervals sorted by start."""
    out, end = [], None
    for a, b in spans:
        if end is not None and a - end >= min_gap:
            out.append((end, a))
        end = b if end is None else max(end, b)
    return out


@dataclass
class ClockCheck:
    """The comparison's outcome; ``lines()`` is what the GPU script's summary prints."""
    forwards: int = 0                 # forwards compared
    offset_ns: int = 0                # CUPTI minus ours at forward starts, taken out (median)
    end_offset_ns: int = 0            # median of the same at forward ends, beyond it: reported, not taken out
    absolute_offset_ns: int | None = None   # the same against the wall-clock mapping, for the record
    start_err_ns: list[int] = field(default_factory=list)   # per forward: first kernel minus our begin
    end_err_ns: list[int] = field(default_factory=list)     # last activity's end minus our end
    outside_ns: list[int] = field(default_factory=list)     # per edge: how far outside its interval
    tight_edges: int = 0              # edges where the stream was busy up to the edge
    drift_ppm: float = 0.0            # slope of the tight start errors over the run
    edge_idle: int = 0                # edges where the device idled >= a bubble inside our span
    edge_idle_ns: int = 0
    our_bubbles: int = 0
    our_bubbles_matched: int = 0      # idle in CUPTI's records too (all but unbracketed work)
    unbracketed_ns: int = 0           # CUPTI activity inside our gaps: work no span of ours holds
    cupti_bubbles: int = 0
    cupti_bubbles_matched: int = 0    # covered by a gap of ours
    hidden_bubbles: int = 0           # CUPTI gaps inside our spans (idle our events call busy)
    hidden_ns: int = 0
    tolerance_ns: int = TOLERANCE_NS
    skipped: str = ""                 # why nothing was compared
    undecided: str = ""               # why the comparison cannot judge our clock (the profiler's own cost)

    @property
    def ok(self) -> bool:
        """The clocks agree: every edge inside its interval, every gap of ours idle in CUPTI's
        records, every CUPTI gap either one of ours or inside our spans (counted apart)."""
        return not self.skipped and self.forwards > 0 and self.worst_ns <= self.tolerance_ns \
            and self.our_bubbles_matched == self.our_bubbles \
            and self.cupti_bubbles_matched + self.hidden_bubbles == self.cupti_bubbles

    @property
    def worst_ns(self) -> int:
        return max(self.outside_ns, default=0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "worst_ns": self.worst_ns}

    def lines(self) -> list[str]:
        if self.skipped:
            return [f"clock check skipped: {self.skipped}"]

        def q(xs, p):
            xs = sorted(map(abs, xs))
            return xs[min(len(xs) - 1, int(p * len(xs)))] / 1e3 if xs else 0.0

        absolute = (f"{self.absolute_offset_ns / 1e3:+.1f} us" if self.absolute_offset_ns is not None else "n/a")
        verdict = "AGREE" if self.ok else "UNDECIDED" if self.undecided else "DISAGREE"
        return ([f"clock check vs CUPTI: UNDECIDED: {self.undecided}"] if self.undecided else []) + [
            f"clock check vs CUPTI: {verdict} (tolerance {self.tolerance_ns / 1e3:.0f} us "
            f"after constant offsets taken out: {self.offset_ns / 1e3:+.1f} us at forward starts, "
            f"ends {self.end_offset_ns / 1e3:+.1f} us more at the median; against the wall-clock mapping {absolute})",
            f"  forwards compared: {self.forwards}; |start error| p50 {q(self.start_err_ns, 0.5):.1f} us, "
            f"|end error| p50 {q(self.end_err_ns, 0.5):.1f} us; {self.tight_edges} of {2 * self.forwards} edges "
            f"tight (stream busy up to them); worst edge outside its interval {self.worst_ns / 1e3:.1f} us; "
            f"drift {self.drift_ppm:+.2f} ppm",
            f"  bubbles >= {MIN_GAP_NS / 1e3:.0f} us: ours {self.our_bubbles_matched}/{self.our_bubbles} idle in CUPTI's "
            f"records (work our events do not bracket inside them: {self.unbracketed_ns / 1e3:.1f} us), "
            f"CUPTI's {self.cupti_bubbles_matched}/{self.cupti_bubbles} covered by ours",
            f"  idle our events count as busy: {self.hidden_bubbles} CUPTI gaps inside our spans, "
            f"{self.hidden_ns / 1e3:.1f} us; {self.edge_idle} span edges the host enqueued on an idle stream, "
            f"{self.edge_idle_ns / 1e3:.1f} us",
        ]


def compare_with_cupti(trace: Trace, activities: list[Activity], *, realtime_minus_monotonic_ns: int | None = None,
                       tolerance_ns: int = TOLERANCE_NS, min_gap_ns: int = MIN_GAP_NS,
                       reference_forward_ns: int | None = None) -> ClockCheck:
    """Our compute-stream spans of ``trace`` against CUPTI's ``activities`` of the same run.

    ``reference_forward_ns``: the median decode forward of the same engine run without the
    profiler. On the H200, in two calls of four, torch.profiler slowed every graphed forward
    from 2.75 to 3.9 ms and CUPTI then placed the sample's kernels inside what our events call
    the forward, which stream order forbids on one clock: with the profiled forward over 10%
    slower than that reference, the check says it cannot decide instead of a verdict.

    The compute stream is CUPTI's stream with the most kernel time (every kernel runs
    there; the copy stream only copies). Activities are assigned to the op of ours
    whose span holds their midpoint once the offset is out; the offset starts from the
    first activity against our first op and is refined twice from the forwards.
    """
    ours = sorted((d for d in trace.device_spans if d.stream == "compute" and d.op in COMPUTE_OPS),
                  key=lambda d: d.t0)
    busy: dict[int, int] = {}
    for a in activities:
        if a.kind == "kernel":
            busy[a.stream] = busy.get(a.stream, 0) + a.t1 - a.t0
    if not ours or not busy:
        return ClockCheck(skipped="no CUDA activity recorded" if ours else "no device spans in our trace")
    stream = max(busy, key=busy.get)
    acts = [a for a in activities if a.stream == stream]
    offset = acts[0].t0 - ours[0].t0
    for _ in range(3):
        per_op = _assign(ours, acts, offset)
        starts = [per_op[i][0] - (d.t0 + offset) for i, d in enumerate(ours) if d.op in FORWARD_OPS and i in per_op]
        if not starts:
            return ClockCheck(skipped="no CUPTI activity fell inside our forwards")
        offset += round(statistics.median(starts))
    per_op = _assign(ours, acts, offset)
    res = ClockCheck(offset_ns=offset, tolerance_ns=tolerance_ns)
    if realtime_minus_monotonic_ns is not None:
        res.absolute_offset_ns = offset - realtime_minus_monotonic_ns
    forwards = [(i, d) for i, d in enumerate(ours) if d.op in FORWARD_OPS and i in per_op]
    res.forwards = len(forwards)
    res.end_offset_ns = round(statistics.median(per_op[i][1] - (d.t1 + offset) for i, d in forwards))
    _edges(res, forwards, per_op, acts, offset, min_gap_ns)
    _bubbles(res, ours, acts, offset, min_gap_ns)
    decode = [d.t1 - d.t0 for d in ours if d.op == "forward"]
    if reference_forward_ns and decode and statistics.median(decode) > PERTURBED * reference_forward_ns:
        m = statistics.median(decode)
        res.undecided = (f"torch.profiler slowed the decode forward from {reference_forward_ns / 1e6:.2f} to "
                         f"{m / 1e6:.2f} ms (x{m / reference_forward_ns:.2f}); CUPTI's records of a run it "
                         "perturbed cannot judge our clock: run the check again")
    return res


def _edges(res: ClockCheck, forwards, per_op, acts: list[Activity], offset: int, min_gap_ns: int) -> None:
    """Each forward's begin and end event against the idle interval CUPTI shows around it;
    idle of a bubble's size between an edge and CUPTI's kernel is counted as edge idle."""
    t0s = [a.t0 for a in acts]
    ends_before = list(itertools.accumulate((a.t1 for a in acts), max))   # stream busy until, through acts[k]
    tol = res.tolerance_ns
    tight_times, tight_errs = [], []
    for i, d in forwards:
        first, last = per_op[i]
        k = bisect.bisect_left(t0s, first)
        before = ends_before[k - 1] if k else first      # the stream's work before the forward ends here
        m = bisect.bisect_left(t0s, last)
        after = t0s[m] if m < len(t0s) else last         # and its next work begins here
        start, end = d.t0 + offset, d.t1 + offset
        res.start_err_ns.append(first - start)
        res.end_err_ns.append(last - end)
        for lo, edge, hi, idle in ((before, start, first, first - max(start, before)),
                                   (last, end, max(after, last), min(end, after) - last)):
            res.outside_ns.append(max(lo - edge, edge - hi, 0))
            if hi - lo <= tol:
                res.tight_edges += 1
            elif idle >= min_gap_ns:
                res.edge_idle += 1
                res.edge_idle_ns += idle
        if first - before <= tol:
            tight_times.append(d.t0)
            tight_errs.append(first - start)
    res.drift_ppm = _slope(tight_times, tight_errs) * 1e6


def _slope(xs: list[int], ys: list[int]) -> float:
    if len(xs) < 2 or xs[-1] <= xs[0]:
        return 0.0
    mx, my = statistics.mean(xs), statistics.mean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def _bubbles(res: ClockCheck, ours, acts: list[Activity], offset: int, min_gap_ns: int) -> None:
    """Gaps of ours must be idle in CUPTI's records (but for work we do not bracket);
    CUPTI's gaps must be ours, or lie inside our spans (idle our events call busy)."""
    tol = res.tolerance_ns
    lo, hi = ours[0].t0 + offset - tol, max(d.t1 for d in ours) + offset + tol
    # a gap of ours runs from an op's end event to the next op's begin event
    mine = [(a + offset, b + offset) for a, b in _gaps([(d.t0, d.t1) for d in ours], min_gap_ns)]
    window = [(a.t0, a.t1) for a in acts if lo <= a.t0 and a.t1 <= hi]
    theirs = _gaps(window, min_gap_ns)
    res.our_bubbles, res.cupti_bubbles = len(mine), len(theirs)
    for a, b in mine:
        inside = _overlap_ns(a + tol, b - tol, window)
        res.unbracketed_ns += inside
        res.our_bubbles_matched += (b - a) - inside >= min_gap_ns - 2 * tol
    spans = [(d.t0 + offset, d.t1 + offset) for d in ours]
    for a, b in theirs:
        covered = _overlap_ns(a, b, mine)
        if covered >= (b - a) - 2 * tol:
            res.cupti_bubbles_matched += 1
        elif _overlap_ns(a, b, spans) > tol:
            res.hidden_bubbles += 1
            res.hidden_ns += b - a


def _overlap_ns(a: int, b: int, intervals) -> int:
    """How much of ``[a, b)`` the ``(t0, t1)`` intervals cover, each counted on its own."""
    return sum(max(0, min(b, t1) - max(a, t0)) for t0, t1 in intervals)


def _assign(ours, acts: list[Activity], offset: int) -> dict[int, tuple[int, int]]:
    """Index of our op -> (first start, last end) of the activities whose midpoint its
    span (shifted by ``offset``) holds."""
    out: dict[int, tuple[int, int]] = {}
    j = 0
    for i, d in enumerate(ours):
        s0, s1 = d.t0 + offset, d.t1 + offset
        while j < len(acts) and (acts[j].t0 + acts[j].t1) // 2 < s0:
            j += 1
        k = j
        while k < len(acts) and (acts[k].t0 + acts[k].t1) // 2 <= s1:
            a = acts[k]
            first, last = out.get(i, (a.t0, a.t1))
            out[i] = (min(first, a.t0), max(last, a.t1))
            k += 1
    return out
