"""Steps, phases and call sites of an Nsight Systems export, from its NVTX ranges and backtraces.

* **Steps**: the NVTX ranges named by ``--step-annotation`` (``NAME``, ``NAME#N``, or
  ``DOMAIN:NAME`` to take them from one domain only); else, in a report of our own engine,
  its ``photon_trace`` domain's ``launch`` ranges, whose payload is the step; else the whole
  report is step 0. A record's step is the last step begun at its start (a device op: at its
  launch), -1 before the first.
* **Phases**: our engine's domain holds one range per tick phase (plan, launch, commit,
  finalize, and the stages inside them), its message the phase, its payload the step: they
  are read back as our phases. Any other program's phases are its top-level NVTX ranges
  (those no other range on the thread encloses), step ranges left out.
* **Call sites**: the innermost NVTX range open on the thread when the call began (step
  ranges are not sites: a sync directly in a step is ``"<step> body"``), and the first frame
  of the call's CPU backtrace that is the program's own (not the CUDA runtime, driver or
  profiler), where the report has backtraces.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from pathlib import PurePosixPath

import numpy as np

from photon_trace.telemetry.trace.importers.nsys_read import NsysFormatError
from photon_trace.telemetry.tracer import Phase

ENGINE_DOMAIN = "photon_trace"
ENGINE_STEP_RANGE = Phase.LAUNCH.span_name
_STEP_NUMBER = re.compile(r"#(\d+)$")
_RUNTIME_MODULES = ("libcupti", "libcuda", "libcudart", "libnvToolsExt", "libToolsInjection", "libnvtx")


def split_annotation(annotation: str) -> tuple[str | None, str]:
    """``DOMAIN:NAME`` -> (DOMAIN, NAME); ``NAME`` -> (None, NAME)."""
    domain, sep, name = annotation.rpartition(":")
    return (domain, name) if sep and domain and name else (None, annotation)


class NvtxSteps:
    """Step marks in time order; ``of(t)`` / ``of_many(ts)`` are the steps running at host times."""

    def __init__(self, ranges: list[tuple], annotation: str | None, path: str):
        # Our engine's phases read back whatever the steps are taken from.
        self.engine = any(r[4] == ENGINE_DOMAIN for r in ranges)
        self.domain, self.name = split_annotation(annotation) if annotation else (None, None)
        if annotation:
            marks = [r for r in ranges if self._matches(r[3], r[4])]
            if not marks:
                seen = Counter(r[3].split("#")[0] for r in ranges)
                common = ", ".join(repr(n) for n, _ in seen.most_common(8)) or "none"
                raise NsysFormatError(f"{path}: no NVTX range named {annotation!r} to take steps from "
                                      f"(ranges in the report: {common})")
            ids = []
            for i, r in enumerate(marks):
                m = _STEP_NUMBER.search(r[3])
                ids.append(int(m.group(1)) if m else i)
        else:
            marks = [r for r in ranges if r[4] == ENGINE_DOMAIN and r[3] == ENGINE_STEP_RANGE and r[5] is not None]
            if marks:
                self.domain, self.name = ENGINE_DOMAIN, ENGINE_STEP_RANGE
            ids = [int(r[5]) for r in marks]
        self.label = (f"{self.domain}:{self.name}" if self.domain else self.name) if marks else None
        self.starts = np.array([r[0] for r in marks], dtype=np.int64)
        self.ids = np.array(ids, dtype=np.int64)
        self._starts, self._ids = self.starts.tolist(), ids   # bisect on a list: no numpy scalar per probe

    def _matches(self, text: str, domain: str) -> bool:
        if self.domain is not None and domain != self.domain:
            return False
        return text == self.name or (text.startswith(self.name + "#") and _STEP_NUMBER.search(text) is not None)

    def is_step(self, text: str, domain: str) -> bool:
        return self.label is not None and self._matches(text, domain)

    @property
    def found(self) -> int:
        return len(self.starts)

    def of(self, t: int) -> int:
        if not len(self.starts):
            return 0
        i = bisect_right(self._starts, t) - 1
        return self._ids[i] if i >= 0 else -1

    def of_many(self, ts: np.ndarray) -> np.ndarray:
        if not len(self.starts):
            return np.zeros(len(ts), dtype=np.int64)
        i = np.searchsorted(self.starts, ts, side="right") - 1
        return np.where(i >= 0, self.ids[np.maximum(i, 0)], -1)


def top_level_names(ranges: list[tuple], steps: NvtxSteps) -> list[str]:
    """Names of the NVTX ranges no other (non-step) range on the same thread encloses."""
    by_thread: dict[int, list[tuple]] = defaultdict(list)
    for r in ranges:
        if not steps.is_step(r[3], r[4]):
            by_thread[r[2]].append(r)
    top: set[str] = set()
    for rs in by_thread.values():     # ``ranges`` come by start, longest first
        reach = None
        for t0, t1, _, text, _, _ in rs:
            if reach is None or t0 >= reach:
                top.add(text)
                reach = t1
            elif t1 > reach:          # overlapping, not nested (start/end ranges): also on top
                top.add(text)
                reach = t1
    return sorted(top)


def innermost_ranges(ranges: list[tuple], at: list[tuple[int, int]], steps: NvtxSteps) -> list[tuple]:
    """For each ``(gtid, t)`` in ``at``, the innermost NVTX range (not a step) open on that thread
    at ``t`` as ``(text, domain)``, else ``(None, None)``: one sweep per thread, ranges by start."""
    by_thread: dict[int, list] = defaultdict(list)
    for r in ranges:
        if not steps.is_step(r[3], r[4]):
            by_thread[r[2]].append((r[0], 0, -r[1], r))
    for i, (g, t) in enumerate(at):
        by_thread[g].append((t, 1, 0, i))
    out: list[tuple] = [(None, None)] * len(at)
    for items in by_thread.values():
        items.sort(key=lambda e: e[:3])    # at equal times a range opens before a query (it is around it)
        stack: list[tuple] = []
        for t, is_query, _, obj in items:
            while stack and stack[-1][1] <= t:
                stack.pop()
            if is_query:
                if stack:
                    out[obj] = (stack[-1][3], stack[-1][4])
            else:
                stack.append(obj)
    return out


def user_frame(frames: list[tuple], api: str) -> str | None:
    """The first frame of a backtrace (innermost first) in the program's own code, as
    ``symbol (module)``: the CUDA runtime, driver and profiler frames, unresolved addresses and
    the API function itself are passed over."""
    for _, _, symbol, module, unresolved in frames:
        if unresolved or not symbol or symbol == api:
            continue
        name = PurePosixPath(module or "").name
        if name.startswith(_RUNTIME_MODULES):
            continue
        return f"{symbol} ({name})" if name else symbol
    return None


def call_site(nvtx: str | None, domain: str | None, frame: str | None, step_label: str | None,
              in_step: bool) -> str:
    """Where a call was made: the innermost NVTX range around it and the program's own frame."""
    parts = []
    if nvtx:
        parts.append(f"{domain}:{nvtx}" if domain else nvtx)
    if frame:
        parts.append(frame)
    if parts:
        return " · ".join(parts)
    if step_label and in_step:
        return f"{step_label.split(':')[-1]} body"
    return "(no enclosing NVTX range)"
