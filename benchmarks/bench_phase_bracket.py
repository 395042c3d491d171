"""What a host span costs the tick: today's ``begin``/``end`` pair against a ``with tr.phase(...)``
bracket, per call, on the no-op tracer and on the recording tracer.

The tick brackets its phases with 16 begin/end lines; a context manager would read shorter.
It is adopted only if it costs no more on the hot path, so both are measured here in one run,
A/B alternated round by round (the machine's load drifts alike over both), and the median of
the rounds printed. The bracket candidates live in this file, so the comparison can be rerun:

* no-op: ``phase()`` returns one shared do-nothing context manager;
* recording, ``span object``: ``phase()`` returns a small slotted object holding the span,
  whose ``__exit__`` appends the same tuple ``end`` appends;
* recording, ``reused``: ``phase()`` notes its arguments on the tracer and returns the
  tracer itself, which keeps a stack of open spans (no allocation beyond the record).

Rows: a phase recorded at level ON (``launch``) and a sub-phase the ON recorder skips
(``stage``, recorded at FULL only). Never fails on speed.

    python benchmarks/bench_phase_bracket.py [--rounds 9] [--number 200000]
"""
from __future__ import annotations

import argparse
import statistics
import timeit
from threading import current_thread

from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.tracer import Phase, Tracer, TraceLevel


class _NoBracket:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


_NO_BRACKET = _NoBracket()


class BracketNull(Tracer):
    """The no-op tracer with a bracket."""

    def phase(self, phase: Phase, step: int, slot: int) -> _NoBracket:
        return _NO_BRACKET


class _Span:
    __slots__ = ("tracer", "phase", "step", "slot", "t0")

    def __init__(self, tracer: BracketRecording, phase: Phase, step: int, slot: int) -> None:
        self.tracer, self.phase, self.step, self.slot = tracer, phase, step, slot

    def __enter__(self) -> None:
        self.t0 = self.tracer._now()

    def __exit__(self, *exc) -> None:
        tr = self.tracer
        if tr._keeps[self.phase]:
            i = tr._host_spans_n
            tr._host_spans[i & tr._mask] = (self.phase, self.step, self.slot, self.t0, tr._now(), current_thread(),
                                            None, None)   # no thread counters: the bracket alone is timed
            tr._host_spans_n = i + 1


class BracketRecording(RecordingTracer):
    """The recording tracer with both bracket candidates (``phase`` and ``phase_reused``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._open: list[tuple] = []
        self._next: tuple = ()

    def phase(self, phase: Phase, step: int, slot: int) -> _Span:
        return _Span(self, phase, step, slot)

    def phase_reused(self, phase: Phase, step: int, slot: int) -> BracketRecording:
        self._next = (phase, step, slot)
        return self

    def __enter__(self) -> None:
        self._open.append((*self._next, self._now()))

    def __exit__(self, *exc) -> None:
        phase, step, slot, t0 = self._open.pop()
        if self._keeps[phase]:
            i = self._host_spans_n
            self._host_spans[i & self._mask] = (phase, step, slot, t0, self._now(), current_thread(), None, None)
            self._host_spans_n = i + 1


PAIR = "t0 = tr.begin(phase, 5, 1)\ntr.end(phase, 5, 1, t0)"
BRACKET = "with tr.phase(phase, 5, 1):\n    pass"
REUSED = "with tr.phase_reused(phase, 5, 1):\n    pass"


def per_call_ns(tracer: Tracer, phase: Phase, stmts: dict[str, str], rounds: int, number: int) -> dict[str, list]:
    """ns per call of each statement, one round of each in turn (A/B alternated), ``rounds`` times."""
    timers = {name: timeit.Timer(stmt, globals={"tr": tracer, "phase": phase}) for name, stmt in stmts.items()}
    out: dict[str, list] = {name: [] for name in stmts}
    for r in range(rounds):
        order = list(timers) if r % 2 == 0 else list(reversed(timers))
        for name in order:
            out[name].append(timers[name].timeit(number) / number * 1e9)
        flush = getattr(tracer, "flush", None)
        if flush is not None:
            flush()       # drain the ring between rounds, as the engine's waits would
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--number", type=int, default=200_000, help="calls per round")
    args = ap.parse_args()
    rec = BracketRecording(TraceLevel.ON, flush_interval_s=None, nvtx=False)
    cases = [("no-op tracer", BracketNull(), Phase.LAUNCH, {"begin/end": PAIR, "bracket": BRACKET}),
             ("recording, launch (ON)", rec, Phase.LAUNCH,
              {"begin/end": PAIR, "bracket": BRACKET, "bracket reused": REUSED}),
             ("recording, stage (skipped at ON)", rec, Phase.STAGE,
              {"begin/end": PAIR, "bracket": BRACKET, "bracket reused": REUSED})]
    print(f"per-call cost of one host span, ns: median of {args.rounds} rounds x {args.number} calls, A/B alternated")
    for title, tracer, phase, stmts in cases:
        runs = per_call_ns(tracer, phase, stmts, args.rounds, args.number)
        base = statistics.median(runs["begin/end"])
        cells = []
        for name, xs in runs.items():
            med = statistics.median(xs)
            rel = "" if name == "begin/end" else f" ({med - base:+.0f} ns, {med / base - 1:+.0%})"
            cells.append(f"{name} {med:.0f}{rel}")
        print(f"  {title:34s} " + "; ".join(cells))
    rec.close()


if __name__ == "__main__":
    main()
