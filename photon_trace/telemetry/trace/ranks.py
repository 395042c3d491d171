"""A distributed job as one trace: every rank's records on one clock, each lane named by its rank.

One trace per rank comes in (``importers/rank_files.py`` reads them and finds their clocks);
``merge_ranks`` makes them one ``Trace`` whose lanes read ``rank 1 · gpu1 stream 7`` and
``rank 1 · thread 7`` and whose header lists the ranks (``ranks``: rank, file, the shift put
on its times, its own header) and how their clocks were aligned (``alignment``). Everything
that reads a trace reads it as it is: the timeline draws a rank's lanes together, the Perfetto
export a track per lane. ``split_ranks`` gives each rank back as the trace it was (on the
job's clock), for the per-rank analysis and the comparisons across ranks
(``telemetry/analysis/ranks.py``). Written with ``write_trace``, a job reloads as a job.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from photon_trace.telemetry.trace.records import DeviceSpan, HostSpan, HostWait, StepRecord, Trace

SEP = " · "
_LANE = re.compile(r"^rank (\d+) · (.*)$", re.S)


class RankInput(NamedTuple):
    rank: int
    file: str
    trace: Trace
    shift_ns: int       # added to every time of the rank's trace to put it on the job's clock


def rank_lane(rank: int, lane: str) -> str:
    return f"rank {rank}{SEP}{lane}"


def lane_rank(lane: str) -> tuple[int, str] | None:
    """(rank, the lane's own name) of a merged lane, or None."""
    m = _LANE.match(lane)
    return (int(m.group(1)), m.group(2)) if m else None


def is_ranks(trace: Trace) -> bool:
    return bool(trace.header.get("ranks"))


def merge_ranks(ranks: list[RankInput], alignment: dict) -> Trace:
    """One trace of the job (see the module docstring); ``ranks`` in rank order."""
    host: list[HostSpan] = []
    device: list[DeviceSpan] = []
    waits: list[HostWait] = []
    steps: dict[int, StepRecord] = {}
    phases: set[str] = set()
    categories: dict[str, dict] = {"host": {}, "device": {}}
    stream_devices: dict[str, str] = {}
    overhead: dict[str, list] = {}
    for r, file, t, shift in ranks:
        stream_devices.update({rank_lane(r, s): rank_lane(r, d) for s, d in (t.header.get("stream_devices") or {}).items()})
        overhead.update({rank_lane(r, d): [[a + shift, b + shift] for a, b in spans]
                         for d, spans in (t.header.get("profiler_overhead") or {}).items()})
        host += [h._replace(thread=rank_lane(r, h.thread), t0=h.t0 + shift, t1=h.t1 + shift) for h in t.host_spans]
        device += [d._replace(stream=rank_lane(r, d.stream), t0=d.t0 + shift, t1=d.t1 + shift,
                              enqueued=d.enqueued + shift if d.enqueued else 0) for d in t.device_spans]
        waits += [w._replace(site=rank_lane(r, w.site), t0=w.t0 + shift, t1=w.t1 + shift) for w in t.waits]
        for s in t.steps:
            steps.setdefault(s.step, s)
        phases |= set(t.header.get("host_phases") or ())
        for k in categories:
            categories[k].update((t.header.get("categories") or {}).get(k) or {})
    first = ranks[0].trace.header
    primary = next((rank_lane(r, t.header["primary_stream"]) for r, _, t, _ in ranks
                    if t.header.get("primary_stream")), None)
    header = {k: v for k, v in first.items() if k not in ("source", "primary_stream", "host_phases", "categories",
                                                           "stream_devices", "graph_replays", "truncated",
                                                           "profiler_overhead", "nsys_rules")}
    header.update({
        "stream_devices": stream_devices,
        "profiler_overhead": overhead,
        "trace_level": "imported",
        "primary_stream": primary,
        "host_phases": sorted(phases),
        "categories": categories,
        "graph_replays": sum(int(t.header.get("graph_replays") or 0) for _, _, t, _ in ranks),
        "source": {"format": "ranks", "files": [f for _, f, _, _ in ranks],
                   "formats": sorted({(t.header.get("source") or {}).get("format") or "photon_trace"
                                      for _, _, t, _ in ranks})},
        "ranks": [{"rank": r, "file": f, "shift_ns": shift, "header": t.header} for r, f, t, shift in ranks],
        "alignment": alignment,
    })
    if any(t.header.get("truncated") for _, _, t, _ in ranks):
        header["truncated"] = True
    return Trace(header, sorted(host, key=lambda h: (h.t0, -h.t1)), sorted(device, key=lambda d: (d.t0, d.t1)),
                 sorted(waits, key=lambda w: (w.t0, w.t1)), [steps[s] for s in sorted(steps)], [])


def split_ranks(trace: Trace) -> list[tuple[int, Trace]]:
    """Each rank of a merged trace as its own trace (on the job's clock), in rank order."""
    out = []
    for entry in trace.header.get("ranks") or []:
        r = entry["rank"]
        prefix = rank_lane(r, "")
        own = lambda name: name[len(prefix):] if name.startswith(prefix) else None  # noqa: E731
        host = [h._replace(thread=own(h.thread)) for h in trace.host_spans if h.thread.startswith(prefix)]
        device = [d._replace(stream=own(d.stream)) for d in trace.device_spans if d.stream.startswith(prefix)]
        waits = [w._replace(site=own(w.site)) for w in trace.waits if w.site.startswith(prefix)]
        used = {d.step for d in device} | {h.step for h in host} | {w.step for w in waits}
        steps = [s for s in trace.steps if s.step in used]
        out.append((r, Trace(dict(entry["header"]), host, device, waits, steps, [])))
    return out
