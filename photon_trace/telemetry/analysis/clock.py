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
``torch.profiler``) in the same run. Each of our forwards must start and end
where CUPTI's first and last activity inside it do, and the two must find the
same bubbles, within a stated tolerance, after one constant offset (the median
over forwards: Kineto's clock against ours, plus the event-to-kernel latency,
which no comparison can tell apart) is taken out.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from photon_trace.telemetry.trace.records import COMPUTE_OPS, Trace

TOLERANCE_NS = 10_000        # per forward start/end and per bubble edge, after the offset
MIN_GAP_NS = 20_000          # bubbles compared: the analysis's threshold (bubbles.MIN_BUBBLE_NS)
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


def _matched(gap: tuple[int, int], others: list[tuple[int, int]], tol: int) -> bool:
    return any(abs(a - gap[0]) <= tol and abs(b - gap[1]) <= tol for a, b in others)


@dataclass
class ClockCheck:
    """The comparison's outcome; ``lines()`` is what the GPU script's summary prints."""
    forwards: int = 0                 # forwards compared
    offset_ns: int = 0                # CUPTI minus ours at forward starts, taken out (median)
    end_offset_ns: int = 0            # and at forward ends, beyond it (event-to-kernel latencies differ)
    absolute_offset_ns: int | None = None   # the same against the wall-clock mapping, for the record
    start_err_ns: list[int] = field(default_factory=list)   # per forward, after the offset
    end_err_ns: list[int] = field(default_factory=list)
    drift_ppm: float = 0.0            # slope of the start errors over the run
    our_bubbles: int = 0
    our_bubbles_matched: int = 0
    cupti_bubbles: int = 0
    cupti_bubbles_matched: int = 0
    hidden_bubbles: int = 0           # CUPTI gaps inside one of our spans (idle our events call busy)
    hidden_ns: int = 0
    tolerance_ns: int = TOLERANCE_NS
    skipped: str = ""                 # why nothing was compared

    @property
    def ok(self) -> bool:
        return not self.skipped and self.forwards > 0 and self.worst_ns <= self.tolerance_ns \
            and self.our_bubbles_matched == self.our_bubbles and self.cupti_bubbles_matched == self.cupti_bubbles

    @property
    def worst_ns(self) -> int:
        return max(map(abs, self.start_err_ns + self.end_err_ns), default=0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "worst_ns": self.worst_ns}

    def lines(self) -> list[str]:
        if self.skipped:
            return [f"clock check skipped: {self.skipped}"]

        def q(xs, p):
            xs = sorted(map(abs, xs))
            return xs[min(len(xs) - 1, int(p * len(xs)))] / 1e3 if xs else 0.0

        absolute = (f"{self.absolute_offset_ns / 1e3:+.1f} us" if self.absolute_offset_ns is not None else "n/a")
        return [
            f"clock check vs CUPTI: {'AGREE' if self.ok else 'DISAGREE'} (tolerance {self.tolerance_ns / 1e3:.0f} us "
            f"after constant offsets taken out: {self.offset_ns / 1e3:+.1f} us at forward starts, "
            f"{self.end_offset_ns / 1e3:+.1f} us more at their ends; against the wall-clock mapping {absolute})",
            f"  forwards compared: {self.forwards}; |start error| p50 {q(self.start_err_ns, 0.5):.1f} us, "
            f"max {q(self.start_err_ns, 1.0):.1f} us; |end error| p50 {q(self.end_err_ns, 0.5):.1f} us, "
            f"max {q(self.end_err_ns, 1.0):.1f} us; drift {self.drift_ppm:+.2f} ppm",
            f"  bubbles >= {MIN_GAP_NS / 1e3:.0f} us: ours {self.our_bubbles_matched}/{self.our_bubbles} found by CUPTI, "
            f"CUPTI's {self.cupti_bubbles_matched}/{self.cupti_bubbles} found by ours; inside our spans (idle our "
            f"events count as busy): {self.hidden_bubbles}, {self.hidden_ns / 1e3:.1f} us",
        ]


def compare_with_cupti(trace: Trace, activities: list[Activity], *, realtime_minus_monotonic_ns: int | None = None,
                       tolerance_ns: int = TOLERANCE_NS, min_gap_ns: int = MIN_GAP_NS) -> ClockCheck:
    """Our compute-stream spans of ``trace`` against CUPTI's ``activities`` of the same run.

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
    times, ends = [], []
    for i, d in enumerate(ours):
        if d.op in FORWARD_OPS and i in per_op:
            first, last = per_op[i]
            res.start_err_ns.append(first - (d.t0 + offset))
            ends.append(last - (d.t1 + offset))
            times.append(d.t0)
    res.forwards = len(times)
    res.end_offset_ns = end_off = round(statistics.median(ends))
    res.end_err_ns = [e - end_off for e in ends]
    if len(times) > 1 and times[-1] > times[0]:
        mt = statistics.mean(times)
        me = statistics.mean(res.start_err_ns)
        num = sum((t - mt) * (e - me) for t, e in zip(times, res.start_err_ns))
        den = sum((t - mt) ** 2 for t in times)
        res.drift_ppm = num / den * 1e6 if den else 0.0
    # bubbles, both ways, over the extent our spans cover
    lo, hi = ours[0].t0 + offset - tolerance_ns, max(d.t1 for d in ours) + offset + tolerance_ns
    # a gap of ours runs from an op's end event to the next op's begin event
    mine = [(a + offset + end_off, b + offset) for a, b in _gaps([(d.t0, d.t1) for d in ours], min_gap_ns)]
    theirs = _gaps([(a.t0, a.t1) for a in acts if lo <= a.t0 and a.t1 <= hi], min_gap_ns)
    near_mine = [(a + offset + end_off, b + offset)
                 for a, b in _gaps([(d.t0, d.t1) for d in ours], min_gap_ns - 2 * tolerance_ns)]
    near_theirs = _gaps([(a.t0, a.t1) for a in acts if lo <= a.t0 and a.t1 <= hi], min_gap_ns - 2 * tolerance_ns)
    res.our_bubbles, res.cupti_bubbles = len(mine), len(theirs)
    res.our_bubbles_matched = sum(_matched(g, near_theirs, tolerance_ns) for g in mine)
    res.cupti_bubbles_matched = sum(_matched(g, near_mine, tolerance_ns) for g in theirs)
    spans = [(d.t0 + offset, d.t1 + offset) for d in ours]
    for a, b in theirs:
        if not _matched((a, b), near_mine, tolerance_ns) and any(s0 <= a and b <= s1 for s0, s1 in spans):
            res.hidden_bubbles += 1
            res.hidden_ns += b - a
    return res


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
