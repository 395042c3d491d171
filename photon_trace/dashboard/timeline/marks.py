"""What the timeline marks besides spans: accidental syncs (with the bubbles they caused)
and the requests lane (how many requests are queued, in prefill or decoding over time).

Pure numpy over a trace's records; ``data.prepare_timeline`` calls both.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from photon_trace.dashboard.timeline.fields import numbers, text_codes
from photon_trace.telemetry.analysis.causes import Cause
from photon_trace.telemetry.trace.records import RequestRecord, Trace

SYNC_NAME = Cause.ACCIDENTAL_SYNC.label
"""The sync markers' legend entry: the words of the cause they give the bubbles they caused."""
SYNC_OUTSIDE_NAME = f"{SYNC_NAME} (outside window)"
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
    waits = trace.waits
    idx = np.flatnonzero(~numbers(waits, "expected").astype(bool))
    t0, t1, step = (numbers(waits, k)[idx] for k in ("t0", "t1", "step"))
    in_window = np.ones(len(idx), dtype=bool) if window is None else (t0 < window[1]) & (t1 >= window[0])
    site_codes, sites = text_codes(waits, "site")
    reason_codes, reasons = text_codes(waits, "reason")
    site_codes, reason_codes = site_codes[idx], reason_codes[idx]
    site = [sites[c] for c in site_codes.tolist()]
    idle = np.zeros(len(idx), dtype=np.float64)
    link_m, link_b = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    synced = [j for j, b in enumerate(bubbles) if b.cause == Cause.ACCIDENTAL_SYNC]
    b_detail = [bubbles[j].detail for j in synced]
    order = np.argsort(site_codes, kind="stable")     # each site's markers, in trace order
    cuts = np.flatnonzero(np.diff(site_codes[order])) + 1
    for ks_a in np.split(order, cuts) if len(order) else []:
        s = sites[int(site_codes[ks_a[0]])]
        js = np.array([j for j, d in zip(synced, b_detail) if d == s], dtype=np.int64)
        if not len(js):
            continue
        o = np.argsort(t0[ks_a], kind="stable")
        starts, ks_a = t0[ks_a][o], ks_a[o]
        b0 = np.fromiter((bubbles[j].t0 for j in js), np.int64, len(js))
        b1 = np.fromiter((bubbles[j].t1 for j in js), np.int64, len(js))
        k = ks_a[np.maximum(np.searchsorted(starts, b1, side="right") - 1, 0)]
        link_m.append(k)
        link_b.append(js)
        counted = np.ones(len(js), bool) if window is None else (b0 >= window[0]) & (b1 <= window[1])
        np.add.at(idle, k[counted], (b1 - b0)[counted])
    return SyncMarkers(t0, t1, np.asarray(wait_lane, dtype=np.int32)[idx] if len(idx) else np.zeros(0, np.int32),
                       step, idle, site, [reasons[c] for c in reason_codes.tolist()], in_window, idx,
                       np.concatenate(link_m), np.concatenate(link_b))


@dataclass(slots=True)
class RequestStates:
    """Requests per lifecycle state over time, and each request's own times.

    ``t[k]`` is a change point; ``counts[k]`` (decode, prefill, queued) hold from it to
    ``t[k + 1]``. Per request (``req_id`` order): arrival, admitted, first token,
    finalized (or aborted) and freed, -1 where the trace has no such event; ``aborted``:
    the request's end (``times[:, 3]``) was an abort, not a normal finish."""
    lane: int
    t: np.ndarray
    counts: np.ndarray
    req_id: np.ndarray
    times: np.ndarray          # (n, 5) int64: arrival, admitted, first_token, finalized, freed
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    peak: int                  # most requests in flight at once: the lane's full height
    aborted: np.ndarray | None = None   # bool per request

    def ended(self) -> np.ndarray:
        """Indices of the requests that ended (finalized or aborted), in order of their end."""
        end = self.times[:, 3]
        idx = np.flatnonzero(end >= 0)
        return idx[np.argsort(end[idx], kind="stable")]

    def in_flight_at(self, t: int) -> np.ndarray:
        """Indices of the requests that had arrived and were not yet finalized at ``t``."""
        arr, fin = self.times[:, 0], self.times[:, 3]
        return np.flatnonzero((arr >= 0) & (arr <= t) & ((fin < 0) | (fin > t)))


EVENTS = {"arrival": 0, "admitted": 1, "first_token": 2, "finalized": 3, "aborted": 3, "freed": 4}


def request_states(records: list[RequestRecord], lane: int) -> RequestStates:
    """Each request's first time of each event, and from them the state counts over time:
    queued [arrival, admitted), prefill [admitted, first token), decode [first token,
    finalized); a missing event closes the state at the request's next known one."""
    rid, t, tok = (numbers(records, k) for k in ("req_id", "t", "tokens"))
    codes, kinds = text_codes(records, "event")
    ev = np.array([EVENTS.get(k, -1) for k in kinds], dtype=np.int64)[codes] if kinds else np.zeros(0, np.int64)
    is_abort = np.array([k == "aborted" for k in kinds], dtype=bool)[codes] if kinds else np.zeros(0, bool)
    ids, inv = np.unique(rid, return_inverse=True)
    known = ev >= 0
    big = np.iinfo(np.int64).max
    times = np.full((len(ids), 5), big, dtype=np.int64)
    np.minimum.at(times, (inv[known], ev[known]), t[known])
    aborted = np.zeros(len(ids), dtype=bool)    # the request's first end event is an abort
    ab = np.flatnonzero(is_abort)
    aborted[inv[ab]] = t[ab] == times[inv[ab], 3]
    times[times == big] = -1
    prompt = np.zeros(len(ids), dtype=np.int64)
    output = np.zeros(len(ids), dtype=np.int64)
    for code, out in ((1, prompt), (0, prompt), (3, output)):     # arrival's count wins over admitted's
        m = ev == code
        out[inv[m]] = tok[m]
    marks = times[:, :4]
    starts, ends, states = [], [], []
    for s, state in enumerate(("queued", "prefill", "decode")):
        end = np.full(len(ids), -1, dtype=np.int64)
        for j in range(3, s, -1):
            end = np.where(marks[:, j] >= 0, marks[:, j], end)
        ok = (marks[:, s] >= 0) & (end > marks[:, s])
        starts.append(marks[ok, s])
        ends.append(end[ok])
        states.append(np.full(int(ok.sum()), REQUEST_STATES.index(state)))
    a, b, st = np.concatenate(starts), np.concatenate(ends), np.concatenate(states)
    if not len(a):
        return RequestStates(lane, np.zeros(0, np.int64), np.zeros((0, 3)), ids, times, prompt, output, 0, aborted)
    when = np.concatenate([a, b])
    which = np.concatenate([st, st])
    delta = np.concatenate([np.ones(len(a), np.int64), -np.ones(len(b), np.int64)])
    o = np.argsort(when, kind="stable")
    when, which, delta = when[o], which[o], delta[o]
    step = np.zeros((len(when), 3), dtype=np.int64)
    step[np.arange(len(when)), which] = delta
    counts = np.cumsum(step, axis=0)
    last = np.concatenate([when[1:] != when[:-1], [True]])   # the counts after every change at a time
    return RequestStates(lane, when[last], counts[last].astype(np.float64), ids, times, prompt, output,
                         int(counts.sum(axis=1).max()), aborted)


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
