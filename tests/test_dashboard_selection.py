"""Selection, details, flows, range statistics, the idle breakdown, search and the requests
lane: the pure functions behind the dashboard's interactions, without a browser."""
from __future__ import annotations

import math

import numpy as np
import pytest

from photon_trace.dashboard.panels import selection
from photon_trace.dashboard.panels.search import search, step_range
from photon_trace.dashboard.panels.stats import idle_breakdown, range_stats
from photon_trace.dashboard.sources.store import outside_bubbles
from photon_trace.dashboard.timeline.data import prepare_timeline
from photon_trace.dashboard.timeline.marks import REQUEST_STATES, mean_counts
from helpers.dashboard_samples import report, sample


@pytest.fixture(scope="module")
def mask_sync():
    tr, rep = sample("mask_sync"), report("mask_sync")
    return tr, rep, prepare_timeline(tr, rep, outside_bubbles(tr, rep.window))


def test_range_statistics_over_the_window_agree_with_the_analysis(mask_sync):
    tr, rep, data = mask_sync
    s = range_stats(data, *rep.window)
    assert math.isclose(s["idle_share"], rep.idle_fraction, rel_tol=1e-6)
    fwd = [r for r in s["rows"] if r["name"] == "forward"][0]
    n = sum(1 for d in tr.device_spans if d.op == "forward" and d.t0 < rep.window[1] and d.t1 > rep.window[0])
    assert fwd["count"] == f"{n:,}" and fwd["lane"] == "device · compute"
    assert {"count", "total", "mean", "p50", "p99"} <= set(fwd)
    causes = {r["cause"] for r in s["idle_rows"]}
    assert "accidental sync" in causes


def test_a_narrow_range_counts_only_what_overlaps_it(mask_sync):
    tr, rep, data = mask_sync
    d = next(d for d in tr.device_spans if d.op == "forward" and d.t0 > rep.window[0])
    s = range_stats(data, d.t0 + 10, d.t1 - 10)
    assert [r["name"] for r in s["rows"] if r["lane"] == "device · compute"] == ["forward"]
    assert s["idle_share"] == 0.0


def test_idle_breakdown_per_stream_matches_the_report_on_the_compute_stream(mask_sync):
    tr, rep, data = mask_sync
    rows = {r["stream"]: r for r in idle_breakdown(data)}
    assert set(rows) == {"compute", "copy"}
    c = rows["compute"]
    assert math.isclose(c["busy"], 1 - rep.idle_fraction, abs_tol=1e-6)
    assert math.isclose(c["idle: host late (nothing enqueued yet)"], rep.host_idle_fraction, abs_tol=1e-6)
    for r in rows.values():
        total = r["busy"] + r["idle: host late (nothing enqueued yet)"] + r["idle: launch latency (enqueued, not started)"]
        total += r["idle: no work (nothing enqueued on this stream)"]   # another stream's (issue 33 item 2)
        assert math.isclose(total, 1.0, abs_tol=1e-6)
    # the copy stream waiting for its next copy is not the host being late
    assert rows["copy"]["idle: host late (nothing enqueued yet)"] == 0.0
    assert rows["copy"]["idle: no work (nothing enqueued on this stream)"] > 0.5


def test_a_device_op_shows_every_field_and_the_host_span_that_enqueued_it(mask_sync):
    tr, rep, data = mask_sync
    st = data.set_named("forward")
    i = len(st) // 2
    sel = {"kind": "span", "set": "forward", "i": i}
    d = selection.details(data, tr, rep, sel)
    rec = tr.device_spans[int(st.index[i])]
    fields = dict(d["fields"])
    for f in rec._fields:
        assert fields[f] == str(getattr(rec, f))
    assert "Perfetto ts (µs from the trace's first record)" in fields
    assert any("enqueued by the host's" in r for r in d["related"])
    assert any(o["name"] == "forward" for o in d["ops"]) and any(o["name"] == "launch" for o in d["ops"])
    m = selection.marks(data, tr, sel)
    arrow = [a for a in m["annotations"] if a["hovertext"] == "enqueued by"]
    assert len(arrow) == 1 and arrow[0]["x"] == pytest.approx(float(data.to_x(rec.t0)))
    assert arrow[0]["ax"] <= arrow[0]["x"]          # from the host's enqueue, earlier, to the op


def test_a_sync_links_to_the_bubbles_it_caused_and_a_bubble_back_to_its_sync(mask_sync):
    tr, rep, data = mask_sync
    k = next(k for k in range(len(data.syncs)) if data.syncs.in_window[k] and len(data.syncs.bubbles_of(k)))
    d = selection.details(data, tr, rep, {"kind": "sync", "k": k})
    assert dict(d["fields"])["call site"] == data.syncs.site[k] and "caused" in d["related"][0]
    m = selection.marks(data, tr, {"kind": "sync", "k": k})
    assert len(m["annotations"]) == len(data.syncs.bubbles_of(k))
    j = int(data.syncs.bubbles_of(k)[0])
    st = next(s for s in data.sets if s.source == "bubbles" and (s.index == j).any())
    i = int(np.flatnonzero(st.index == j)[0])
    bd = selection.details(data, tr, rep, {"kind": "span", "set": st.name, "i": i})
    assert any(data.syncs.site[k] in r for r in bd["related"])
    assert dict(bd["fields"])["who can fix it"] == "host code"


def test_search_finds_steps_ops_and_call_sites(mask_sync):
    tr, rep, data = mask_sync
    hits, summary = search(data, "12")
    assert hits == [("step 12", {"kind": "range", "a": step_range(data, 12)[0], "b": step_range(data, 12)[1]})]
    hits, _ = search(data, "masked_sample")
    assert hits and all(h[1]["set"] == "masked_sample" for h in hits)
    durs = [data.set_named("masked_sample").t1[h[1]["i"]] - data.set_named("masked_sample").t0[h[1]["i"]] for h in hits]
    assert durs == sorted(durs, reverse=True)
    site = rep.syncs[0].site
    hits, summary = search(data, site.split("/")[-1])
    assert hits[0][1]["kind"] == "sync" and "accidental syncs" in summary
    assert search(data, "no such thing")[0] == []


def test_the_requests_lane_counts_each_state_over_time(mask_sync):
    tr, rep, data = mask_sync
    rs = data.requests
    assert rs is not None and rs.peak > 0
    edges = np.array([data.t_min - 1, data.t_max + 1], dtype=np.float64)
    area = mean_counts(rs, edges)[0] * (edges[1] - edges[0])      # request-ns per state over the trace
    expect = {"queued": 0, "prefill": 0, "decode": 0}
    for row in rs.times:        # a state lasts from its event to the next event the request has
        marks = [int(x) for x in row[:4]]
        for n, state in enumerate(("queued", "prefill", "decode")):
            later = [x for x in marks[n + 1:] if x >= 0]
            if marks[n] >= 0 and later:
                expect[state] += later[0] - marks[n]
    assert expect["decode"] > 0
    for s, state in enumerate(REQUEST_STATES):
        assert math.isclose(area[s], expect[state], rel_tol=1e-6)
    mid = (rep.window[0] + rep.window[1]) // 2
    assert len(rs.in_flight_at(mid)) >= 1


def test_the_bubbles_outside_the_window_are_classified_and_never_counted(mask_sync):
    tr, rep, data = mask_sync
    outside = [b for b in data.bubbles[len(rep.bubbles):]]
    assert outside and all(b.t1 <= rep.window[0] or b.t0 >= rep.window[1] for b in outside)
    assert sum(int(st.in_window.sum()) for st in data.sets if st.group == "bubble") == len(rep.bubbles)
    assert (~data.syncs.in_window).any()          # the warm-up's syncs are marked too


def _first_end(trace) -> dict[int, tuple[int, str]]:
    """Per request, its first end event (time, kind), straight from the records."""
    out: dict[int, tuple[int, str]] = {}
    for r in trace.requests:
        if r.event in ("finalized", "aborted") and (r.req_id not in out or r.t < out[r.req_id][0]):
            out[r.req_id] = (r.t, r.event)
    return out


def test_the_requests_lane_marks_where_each_request_finished_or_was_aborted():
    from helpers.loop_sim import SyntheticRun, synthetic_trace
    from photon_trace.dashboard.timeline.figure import timeline_figure
    from photon_trace.dashboard.timeline.view import View
    tr = synthetic_trace(SyntheticRun(steps=60, requests=24, abort_every=4, seed=3))
    data = prepare_timeline(tr)
    ends = _first_end(tr)
    assert {k for k in ends.values() if k[1] == "aborted"} and {k for k in ends.values() if k[1] == "finalized"}
    fig = timeline_figure(data, View())
    drawn = {t.name: t for t in fig.data if t.name in ("requests: finished", "requests: aborted")}
    for name, kind in (("requests: finished", "finalized"), ("requests: aborted", "aborted")):
        want = sorted((t, rid) for rid, (t, k) in ends.items() if k == kind)
        assert list(drawn[name].customdata[:, 0]) == [rid for _, rid in want]
        assert np.allclose(drawn[name].x, [(t - data.origin) / 1e9 for t, _ in want])
    i = int(data.requests.ended()[0])
    rid = int(data.requests.req_id[i])
    det = selection.details(data, tr, None, {"kind": "request", "i": i})
    assert det["title"] == f"request {rid} · {ends[rid][1]}"
    assert dict(det["fields"])["output tokens"] == str(max(r.tokens for r in tr.requests
                                                           if r.req_id == rid and r.event == ends[rid][1]))
    box = selection.marks(data, tr, {"kind": "request", "i": i})["shapes"][0]
    arrival = min(r.t for r in tr.requests if r.req_id == rid)
    assert math.isclose(box["x0"], (arrival - data.origin) / 1e9)


def test_many_request_ends_are_binned_with_their_counts():
    from helpers.loop_sim import SyntheticRun, synthetic_trace
    from photon_trace.dashboard.timeline.figure import timeline_figure
    from photon_trace.dashboard.timeline.view import View
    tr = synthetic_trace(SyntheticRun(steps=400, requests=300, streams=8, abort_every=5, seed=4))
    data = prepare_timeline(tr)
    ends = _first_end(tr)
    fig = timeline_figure(data, View(width_px=200))          # 50 bins: fewer marks than ends
    finished = next(t for t in fig.data if t.name == "requests: finished")
    n_finalized = sum(1 for _, k in ends.values() if k == "finalized")
    assert len(finished.x) < n_finalized and finished.customdata[:, 0].sum() == n_finalized
