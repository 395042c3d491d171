"""What the timeline marks besides spans: accidental syncs (with the bubbles they caused)
and the requests lane (how many requests are queued, in prefill or decoding over time).

Pure numpy over a trace's records; ``timeline_data.prepare_timeline`` calls both.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from photon_trace.telemetry.records import RequestRecord, Trace

REQUEST_STATES = ("decode", "prefill", "queued")   # stacked bottom to top in the requests lane


@dataclass(slots=True)
class SyncMarkers:
    """Accidental (unexpected) host waits in the whole trace: one marker each.

    ``idle_ns`` is the device idle of the counted (in-window) accidental-sync bubbles
    each one caused, so the markers in the window sum to each site's ``idle_ns`` in
    the analysis; ``link_marker[k]`` caused bubble ``link_bubble[k]`` (an index into
    the timeline's bubble list), in or out of the window."""
    t0: np.ndarray
    t1: np.ndarray
    lane: np.ndarray
    step: np.ndarray
    idle_ns: np.ndarray
    site: list[str]
    reason: list[str]
    in_window: np.ndarray     # bool: inside the analysis window, so counted in the cards and tables
    index: np.ndarray         # position in trace.waits
    link_marker: np.ndarray
    link_bubble: np.ndarray

    def __len__(self) -> int:
        return len(self.t0)

    def bubbles_of(self, k: int) -> np.ndarray:
        return self.link_bubble[self.link_marker == k]


def sync_markers(trace: Trace, window: tuple[int, int] | None, wait_lane: np.ndarray, bubbles: list,
                 compute_lane: int) -> SyncMarkers:
    """Each accidental-sync bubble goes to the latest wait at its call site (the bubble's
    ``detail``) that began before the bubble ended: the wait that drained the queue."""
    idx = np.array([i for i, w in enumerate(trace.waits) if not w.expected], dtype=np.int64)
    ws = [trace.waits[i] for i in idx]
    t0 = np.array([w.t0 for w in ws], dtype=np.int64)
    t1 = np.array([w.t1 for w in ws], dtype=np.int64)
    in_window = np.ones(len(ws), dtype=bool) if window is None else (t0 < window[1]) & (t1 >= window[0])
    by_site: dict[str, list[int]] = {}
    for k, w in enumerate(ws):
        by_site.setdefault(w.site, []).append(k)
    for site, ks in by_site.items():
        by_site[site] = sorted(ks, key=lambda k: t0[k])
    idle = np.zeros(len(ws), dtype=np.float64)
    link_m, link_b = [], []
    for j, b in enumerate(bubbles):
        ks = by_site.get(b.detail) if b.cause == "accidental_sync" else None
        if not ks:
            continue
        starts = t0[ks]
        pos = max(int(np.searchsorted(starts, b.t1, side="right")) - 1, 0)
        k = ks[pos]
        link_m.append(k)
        link_b.append(j)
        if window is None or (b.t0 >= window[0] and b.t1 <= window[1]):
            idle[k] += b.t1 - b.t0
    return SyncMarkers(t0, t1, np.asarray(wait_lane, dtype=np.int32)[idx] if len(idx) else np.zeros(0, np.int32),
                       np.array([w.step for w in ws], dtype=np.int64), idle,
                       [w.site for w in ws], [w.reason for w in ws], in_window, idx,
                       np.array(link_m, dtype=np.int64), np.array(link_b, dtype=np.int64))


@dataclass(slots=True)
class RequestStates:
    """Requests per lifecycle state over time, and each request's own times.

    ``t[k]`` is a change point; ``counts[k]`` (decode, prefill, queued) hold from it to
    ``t[k + 1]``. Per request (``req_id`` order): arrival, admitted, first token,
    finalized (or aborted) and freed, -1 where the trace has no such event."""
    lane: int
    t: np.ndarray
    counts: np.ndarray
    req_id: np.ndarray
    times: np.ndarray          # (n, 5) int64: arrival, admitted, first_token, finalized, freed
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    peak: int                  # most requests in flight at once: the lane's full height

    def in_flight_at(self, t: int) -> np.ndarray:
        """Indices of the requests that had arrived and were not yet finalized at ``t``."""
        arr, fin = self.times[:, 0], self.times[:, 3]
        return np.flatnonzero((arr >= 0) & (arr <= t) & ((fin < 0) | (fin > t)))


def request_states(records: list[RequestRecord], lane: int) -> RequestStates:
    events = ("arrival", "admitted", "first_token", "finalized", "freed")
    first: dict[int, dict[str, tuple[int, int]]] = {}
    for r in records:
        e = "finalized" if r.event == "aborted" else r.event
        first.setdefault(r.req_id, {}).setdefault(e, (r.t, r.tokens))
    ids = sorted(first)
    times = np.full((len(ids), 5), -1, dtype=np.int64)
    prompt = np.zeros(len(ids), dtype=np.int64)
    output = np.zeros(len(ids), dtype=np.int64)
    for i, rid in enumerate(ids):
        ev = first[rid]
        for j, name in enumerate(events):
            if name in ev:
                times[i, j] = ev[name][0]
        prompt[i] = (ev.get("arrival") or ev.get("admitted") or (0, 0))[1]
        output[i] = (ev.get("finalized") or (0, 0))[1]
    # State entry/exit per request: queued [arrival, admitted), prefill [admitted, first token),
    # decode [first token, finalized). A missing event closes the state at the next known one.
    deltas: list[tuple[int, int, int]] = []
    for row in times:
        marks = [row[0], row[1], row[2], row[3]]
        for state, (a, b) in zip(("queued", "prefill", "decode"), zip(marks[:3], marks[1:])):
            if a < 0:
                continue
            end = b if b >= 0 else next((x for x in marks[marks.index(a) + 1:] if x >= 0), -1)
            if end < 0 or end <= a:
                continue
            s = REQUEST_STATES.index(state)
            deltas += [(int(a), s, 1), (int(end), s, -1)]
    if not deltas:
        return RequestStates(lane, np.zeros(0, np.int64), np.zeros((0, 3)), np.array(ids), times, prompt, output, 0)
    d = np.array(deltas, dtype=np.int64)
    order = np.argsort(d[:, 0], kind="stable")
    d = d[order]
    step = np.zeros((len(d), 3), dtype=np.int64)
    step[np.arange(len(d)), d[:, 1]] = d[:, 2]
    counts = np.cumsum(step, axis=0)
    # one row per distinct time: the counts after every change at that time
    last = np.concatenate([d[1:, 0] != d[:-1, 0], [True]])
    t, counts = d[last, 0], counts[last]
    return RequestStates(lane, t, counts.astype(np.float64), np.array(ids, dtype=np.int64), times, prompt, output,
                         int(counts.sum(axis=1).max()) if len(counts) else 0)


def mean_counts(rs: RequestStates, edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean of each state's count over each interval between ``edges``: (n - 1, 3)."""
    if not len(rs.t):
        return np.zeros((len(edges) - 1, 3))
    dt = np.diff(rs.t).astype(np.float64)
    cum = np.vstack([np.zeros((1, 3)), np.cumsum(rs.counts[:-1] * dt[:, None], axis=0)])   # integral up to t[k]

    def integral(x: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(rs.t, x, side="right") - 1, 0, len(rs.t) - 1)
        before = x < rs.t[0]
        out = cum[k] + rs.counts[k] * (x - rs.t[k])[:, None]
        out[before] = 0.0
        after = x > rs.t[-1]
        out[after] = cum[-1] + rs.counts[-1] * (x[after] - rs.t[-1])[:, None]
        return out
    area = integral(np.asarray(edges, dtype=np.float64))
    width = np.diff(edges).astype(np.float64)
    return np.diff(area, axis=0) / np.maximum(width, 1e-9)[:, None]
