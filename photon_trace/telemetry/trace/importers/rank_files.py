"""A distributed job's traces, one per rank, read and put on one clock.

``photon-trace import|check|dashboard`` take a folder (or several files) holding one trace per
rank: PyTorch profiler traces (``tensorboard_trace_handler`` writes one per rank) or Nsight
Systems exports (one report per rank). Each is read by ``load_any``; ``load_ranks`` then
merges them (``telemetry/trace/ranks.py``).

**Which rank**: the profiler's ``distributedInfo.rank``, else a number after ``rank`` in the
file name (``rank-3``, ``rank3``, ``sampled_rank-1``), else the order of the files. Two files
claiming one rank are bad input.

**One clock**: every rank's times are put on the wall clock its trace names, then all are
shifted by one amount so the earliest rank's clock origin is kept:

* a profiler trace's timestamps are µs since its ``baseTimeNanoseconds`` (newer PyTorch) or
  since the epoch (older, no base time): wall time is base + ts, or ts;
* an Nsight export's are ns since its session start, whose wall time the header keeps;
* ours are monotonic ns, with the wall time of one monotonic instant in the header.

How far two ranks' clocks may disagree is said in ``alignment``: on one host (every trace names
the same host) they read one clock, to within its resolution; across hosts the offset
between their clocks is unknown here, and the cross-rank analysis measures it from the
collectives' ends (``telemetry/analysis/ranks.py``).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from photon_trace.telemetry.trace.file import TraceFormatError
from photon_trace.telemetry.trace.ranks import RankInput, merge_ranks
from photon_trace.telemetry.trace.records import Trace

RANK_SUFFIXES = (".json", ".json.gz", ".sqlite", ".sqlite.gz", ".trace.jsonl", ".trace.jsonl.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)


def rank_files(inputs: list[str | os.PathLike]) -> list[Path]:
    """The trace files ``inputs`` name: each file as given, each folder's trace files by name."""
    out: list[Path] = []
    for x in inputs:
        p = Path(x)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(RANK_SUFFIXES))
            if not found:
                raise TraceFormatError(f"{p}: a folder with no trace files (.json[.gz], .sqlite[.gz], "
                                       f".trace.jsonl[.gz]) to read as ranks")
            out += found
        else:
            out.append(p)
    return out


def _rank_of(trace: Trace, path: Path) -> int | None:
    info = (trace.header.get("source") or {}).get("distributed") or {}
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def wall_offset_ns(trace: Trace) -> tuple[int, str]:
    """(what to add to the trace's times to get wall-clock ns, what that clock is)."""
    source = trace.header.get("source") or {}
    clock = trace.header.get("clock") or {}
    if source.get("format") == "kineto":
        base = source.get("base_time_ns")
        starts = [d.t0 for d in trace.device_spans[:1]] + [h.t0 for h in trace.host_spans[:1]]
        first = min(starts) if starts else 0
        if isinstance(base, int) and base > 0 and first < base:
            return base, "the profiler's baseTimeNanoseconds + ts"
        return 0, "the profiler's timestamps (µs since the epoch)"
    if source.get("format") == "nsys":
        return int(clock.get("wall_ns") or 0), "the Nsight session's start (wall clock) + ns since it"
    return int(clock.get("wall_ns") or 0) - int(clock.get("mono_ns") or 0), "the trace's wall-clock anchor"


def _hostname(trace: Trace) -> str | None:
    host = trace.header.get("host") or {}
    return host.get("hostname") if isinstance(host, dict) else None


def load_ranks(inputs: list[str | os.PathLike], *, load=None, **load_kw) -> Trace:
    """The job in ``inputs`` (a folder, or several files) as one merged trace (``merge_ranks``).

    ``load``: reads one file (default ``load_any``, given ``load_kw``). Any file's error is raised
    naming that file; two files of one rank, or a single trace, are bad input here."""
    if load is None:
        from photon_trace.telemetry.trace.importers.sniff import load_any as load
    paths = rank_files(inputs)
    if len(paths) < 2:
        raise TraceFormatError(f"{', '.join(str(p) for p in paths) or 'nothing'}: ranks need two traces or more "
                               f"(one per rank); a single trace is imported as it is")
    read = [(p, load(p, **load_kw)) for p in paths]
    numbered = [(_rank_of(t, p), p, t) for p, t in read]
    seen: dict[int, Path] = {}
    for i, (r, p, _) in enumerate(numbered):
        if r is None:
            continue
        if r in seen:
            raise TraceFormatError(f"{seen[r]} and {p} are both rank {r}: one trace per rank")
        seen[r] = p
    free = iter(n for n in range(len(numbered) + max(seen, default=0) + 1) if n not in seen)
    numbered = sorted((((r if r is not None else next(free)), p, t) for r, p, t in numbered), key=lambda x: x[0])
    offsets = [wall_offset_ns(t) for _, _, t in numbered]
    base = min(o for o, _ in offsets)
    hosts = {_hostname(t) for _, _, t in numbered}
    resolution = max(int((t.header.get("clock") or {}).get("resolution_ns") or 1) for _, _, t in numbered)
    same_host = None if None in hosts else len(hosts) == 1
    alignment = {
        "clocks": sorted({how for _, how in offsets}),
        "hosts": sorted(h for h in hosts if h),
        "same_host": same_host,
        # one host: one clock, to within its resolution; otherwise unknown until measured
        "error_ns": resolution if same_host else None,
    }
    ranks = [RankInput(r, p.name, t, off - base) for (r, p, t), (off, _) in zip(numbered, offsets)]
    return merge_ranks(ranks, alignment)
