"""The dashboard's figure builders and panels, without a browser."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from photon_trace.dashboard import panels
from photon_trace.dashboard.timeline import (BUBBLE_CAUSES, View, compare_figure, prepare_timeline,
                                             timeline_figure, timeline_traces, x_range_from_relayout)
from photon_trace.telemetry.analysis import analyze, cost_model
from helpers.dashboard_samples import report, sample, span_count


def polygons(trace) -> int:
    """Closed rectangles in a filled scattergl trace: runs of points between NaN gaps."""
    x = np.asarray(trace.x, dtype=np.float64)
    if not len(x):
        return 0
    return int(np.isnan(x).sum()) + 1


def by_name(fig, prefix: str, yaxis: str | None = None) -> list:
    return [t for t in fig.data if t.name and t.name.startswith(prefix) and not t.name.endswith("(hover)")
            and (yaxis is None or (t.yaxis or "y") == yaxis)]


def sync_marker_count(fig, yaxis: str | None = None) -> int:
    return sum(len(t.x) for t in by_name(fig, "accidental sync", yaxis))


def accidental_syncs(rep) -> int:
    return sum(s.count for s in rep.syncs)


@pytest.fixture(scope="module")
def mask_sync():
    tr, rep = sample("mask_sync"), report("mask_sync")
    return tr, rep, prepare_timeline(tr, rep)


def test_one_lane_per_host_thread_and_device_stream(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    labels = list(fig.layout.yaxis.ticktext)
    threads = list(dict.fromkeys(s.thread for s in tr.host_spans))   # in order of first appearance
    streams = {d.stream for d in tr.device_spans}
    assert labels == [f"host · {t}" for t in threads] + [f"device · {s}" for s in ("compute", "copy") if s in streams]
    assert fig.layout.meta["lanes"] == labels


def test_one_webgl_trace_per_category_with_phases_and_ops_in_their_own_colours(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    assert all(t.type == "scattergl" for t in fig.data)
    names = Counter(t.name for t in fig.data if not t.name.endswith("(hover)"))
    assert all(n == 1 for n in names.values()), names
    for phase in ("plan", "launch", "commit", "finalize"):
        assert phase in names
    for op in ("forward", "sample", "copy_back"):
        assert op in names
    colours = {t.fillcolor for t in fig.data if t.name in ("plan", "launch", "commit", "finalize")}
    assert len(colours) == 4


def test_spans_are_filled_rectangles_separated_by_gaps(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    forward = by_name(fig, "forward")[0]
    n_forward = sum(1 for d in tr.device_spans if d.op == "forward")
    assert forward.fill == "toself" and polygons(forward) == n_forward
    x = np.asarray(forward.x, dtype=np.float64).reshape(-1)
    first = x[:5]
    assert first[0] == first[3] == first[4] and first[1] == first[2] and first[1] > first[0]


def test_shaded_bubbles_and_sync_markers_equal_what_analysis_reports(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    assert fig.layout.meta["mode"] == "exact"
    drawn = sum(polygons(t) for t in by_name(fig, "bubble: "))
    assert drawn == len(rep.bubbles) == fig.layout.meta["bubbles"] > 0
    per_cause = Counter(b.cause for b in rep.bubbles)
    for cause in BUBBLE_CAUSES:
        traces = by_name(fig, f"bubble: {cause}")
        assert sum(polygons(t) for t in traces) == per_cause.get(cause, 0)
    assert sync_marker_count(fig) == accidental_syncs(rep) == fig.layout.meta["syncs"] > 0


def test_blocking_run_shades_its_commit_waits_and_has_no_sync_markers():
    rep = report("blocking")
    fig = timeline_figure(prepare_timeline(sample("blocking"), rep))
    assert sum(polygons(t) for t in by_name(fig, "bubble: ")) == len(rep.bubbles)
    assert by_name(fig, "bubble: commit_wait")
    assert sync_marker_count(fig) == 0


def test_sync_marker_hover_gives_site_wait_and_idle_caused(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    markers = by_name(fig, "accidental sync")[0]
    site = rep.syncs[0].site
    assert all(site in t for t in markers.text)
    assert "site" in markers.hovertemplate and "idle caused" in markers.hovertemplate
    cd = np.asarray(markers.customdata, dtype=np.float64)
    waits = cd[:, 1].sum() * 1e3
    idle = cd[:, 2].sum() * 1e3
    assert math.isclose(waits, sum(s.wait_ns for s in rep.syncs), rel_tol=1e-6)
    assert math.isclose(idle, sum(s.idle_ns for s in rep.syncs), rel_tol=1e-6)


def test_span_hover_gives_step_slot_rows_and_duration(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    hover = [t for t in fig.data if t.name == "forward (hover)"][0]
    for key in ("step", "slot", "rows", "duration"):
        assert key in hover.hovertemplate
    cd = np.asarray(hover.customdata, dtype=np.float64)
    rows = {r.step: r.rows for r in tr.steps}
    fwd = sorted((d for d in tr.device_spans if d.op == "forward"), key=lambda d: d.t0)
    assert [int(s) for s in cd[:, 0]] == [d.step for d in fwd]
    assert [int(r) for r in cd[:, 2]] == [rows[d.step] for d in fwd]
    assert np.allclose(cd[:, 3], [(d.t1 - d.t0) / 1e3 for d in fwd])
    assert np.allclose(cd[:, 5], [(d.t0 - rep.window[0]) / 1e6 for d in fwd])   # start, ms


def test_host_waits_and_step_boundaries_are_drawn(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    assert polygons(by_name(fig, "wait: accidental")[0]) == sum(1 for w in tr.waits if not w.expected)
    assert by_name(fig, "step boundaries")
    starts = [t for t in fig.data if t.name == "step starts"][0]
    assert len(starts.x) == len({s.step for s in tr.host_spans if s.phase == "launch"})


def test_axis_is_linear_ms_from_the_window_start(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    assert fig.layout.xaxis.type in (None, "linear")
    forward = sorted((d for d in tr.device_spans if d.op == "forward"), key=lambda d: d.t0)[0]
    x = np.asarray(by_name(fig, "forward")[0].x, dtype=np.float64)
    assert math.isclose(x[0], (forward.t0 - rep.window[0]) / 1e6, abs_tol=1e-9)


@pytest.fixture(scope="module")
def long_data():
    tr = sample("long")
    return tr, prepare_timeline(tr, report("long"))


def test_a_long_trace_is_aggregated_into_a_bounded_number_of_buckets(long_data):
    tr, data = long_data
    assert span_count(tr) >= 60_000
    view = View(width_px=1600)
    fig = timeline_figure(data, view)
    meta = fig.layout.meta
    assert meta["mode"] == "aggregate" and meta["spans_visible"] == data.n_spans
    buckets = view.width_px / view.bucket_px
    for t in fig.data:
        if t.fill == "toself":
            assert polygons(t) <= buckets * len(data.lanes)
    points = sum(len(t.x) for t in fig.data)
    assert points < 0.5 * 6 * span_count(tr)


def test_aggregated_compute_lane_shows_the_busy_fraction(long_data):
    tr, data = long_data
    rep = report("long")
    traces, _ = timeline_traces(data, View(x_range=tuple(float(v) for v in (0, (rep.window[1] - rep.window[0]) / 1e6))))
    # Stacked compute ops: the summed heights of their buckets over the band give the busy share.
    lane = [ln.name for ln in data.lanes].index("compute")
    busy = 0.0
    width_total = 0.0
    for t in traces:
        if t.fill != "toself" or t.name not in ("forward", "prefill", "sample", "masked_sample", "device stage"):
            continue
        x = np.asarray(t.x, dtype=np.float64)
        y = np.asarray(t.y, dtype=np.float64)
        n = (len(x) + 1) // 6
        xs, ys = np.append(x, np.nan).reshape(n, 6), np.append(y, np.nan).reshape(n, 6)
        on_lane = np.abs(ys[:, 0] + lane) < 0.5
        busy += np.sum((xs[on_lane, 1] - xs[on_lane, 0]) * (ys[on_lane, 2] - ys[on_lane, 0]) / 0.72)
        width_total = (rep.window[1] - rep.window[0]) / 1e6
    assert math.isclose(busy / width_total, 1 - rep.idle_fraction, abs_tol=0.02)


def test_zooming_draws_only_the_visible_spans_exactly(long_data):
    tr, data = long_data
    lo, hi = 1000.0, 1030.0
    fig = timeline_figure(data, View(x_range=(lo, hi)))
    meta = fig.layout.meta
    assert meta["mode"] == "exact"
    a, b = lo * 1e6 + data.origin, hi * 1e6 + data.origin
    visible = sum(1 for s in tr.host_spans if s.t0 <= b and s.t1 >= a) + \
        sum(1 for d in tr.device_spans if d.t0 <= b and d.t1 >= a) + \
        sum(1 for w in tr.waits if w.t0 <= b and w.t1 >= a)
    assert meta["spans_visible"] == visible < data.n_spans / 100
    for t in fig.data:
        if t.fill == "toself":
            x = np.asarray(t.x, dtype=np.float64)
            x = x[~np.isnan(x)].reshape(-1, 5)
            assert np.all(x.max(axis=1) >= lo - 1) and np.all(x.min(axis=1) <= hi + 1)
    assert list(fig.layout.xaxis.range) == [lo, hi]


def test_relayout_events_are_read_as_zoom_reset_or_nothing():
    assert x_range_from_relayout({"xaxis.range[0]": 5, "xaxis.range[1]": 2}) == ("range", (2.0, 5.0))
    assert x_range_from_relayout({"xaxis.range": [1, 3]}) == ("range", (1.0, 3.0))
    assert x_range_from_relayout({"xaxis2.range[0]": 1, "xaxis2.range[1]": 3}) == ("range", (1.0, 3.0))
    assert x_range_from_relayout({"xaxis.autorange": True}) == ("reset", None)
    assert x_range_from_relayout({"autosize": True}) == (None, None)
    assert x_range_from_relayout(None) == (None, None)


def test_compare_puts_both_traces_on_one_x_axis_each_from_its_own_window_start():
    a, b = sample("blocking"), sample("mask_sync")
    ra, rb = report("blocking"), report("mask_sync")
    fig = compare_figure(prepare_timeline(a, ra), prepare_timeline(b, rb), labels=("A", "B"))
    assert {t.xaxis or "x" for t in fig.data} == {"x"}
    assert {t.yaxis or "y" for t in fig.data} == {"y", "y2"}
    assert sum(polygons(t) for t in by_name(fig, "bubble: ", "y")) == len(ra.bubbles)
    assert sum(polygons(t) for t in by_name(fig, "bubble: ", "y2")) == len(rb.bubbles)
    assert sync_marker_count(fig, "y2") == accidental_syncs(rb) and sync_marker_count(fig, "y") == 0
    fa = np.asarray(by_name(fig, "forward", "y")[0].x, dtype=np.float64)
    fb = np.asarray(by_name(fig, "forward", "y2")[0].x, dtype=np.float64)
    assert -50 < fa[0] < 50 and -50 < fb[0] < 50   # both near their own zero, not an absolute clock
    legend = [t.name for t in fig.data if t.showlegend]
    assert len(legend) == len(set(legend))


# --------------------------------------------------------------------- panels


def test_summary_lists_period_forward_sample_idle_tokens_and_syncs():
    rep = report("mask_sync")
    items = {i["key"]: i["value"] for i in panels.summary_items(rep)}
    assert items["period_ms"] == f"{rep.period_ms:.3f} ms"
    assert items["forward_ms"] == f"{rep.forward_ms:.3f} ms"
    assert items["sample_ms"] == f"{rep.sample_ms:.3f} ms"
    assert items["idle_fraction"] == f"{100 * rep.idle_fraction:.1f} %"
    assert items["host_idle_fraction"] == f"{100 * rep.host_idle_ns / rep.window_ns:.1f} %"
    assert items["accidental_syncs"] == f"{accidental_syncs(rep):,}"
    assert "tokens_per_s" in items
    assert items["clock_error_us"] == f"±{rep.clock_error_ns / 1e3:.1f} µs"   # the device clock's stated error


def test_bubble_table_is_sorted_by_cost_with_causes():
    rep = report("mask_sync")
    rows = panels.bubble_rows(rep, rep.window[0], limit=1000)
    assert len(rows) == len(rep.bubbles)
    cost = [float(r["idle (µs)"].replace(",", "")) for r in rows]
    assert cost == sorted(cost, reverse=True)
    assert {r["cause"] for r in rows} <= set(panels.CAUSE_LABELS.values())


def test_diagnosis_names_cause_site_and_predicted_speedup():
    rep = report("mask_sync")
    rows = panels.diagnosis_rows(rep)
    assert rows[0]["cause"] == "accidental sync"
    assert rows[0]["call site / phase"] == rep.syncs[0].site
    assert rows[0]["predicted speedup"].endswith("×")


def test_period_and_idle_figure_has_series_and_histograms():
    rep = report("blocking")
    fig = panels.step_series_figure(rep)
    kinds = [t.type for t in fig.data]
    assert kinds.count("scattergl") == 2 and kinds.count("histogram") == 2
    assert len(fig.data[0].x) == len(rep.steps)


def test_cost_model_panel_orders_the_pair_by_depth():
    blocking, pipelined = report("blocking"), report("pipelined")
    b, p, note = panels.blocking_and_pipelined(pipelined, blocking)
    assert b is blocking and p is pipelined and "B is the blocking" in note
    cm = cost_model(b, p)
    rows = {r["quantity"]: r["value"] for r in panels.cost_model_rows(cm)}
    assert rows["T_block (blocking period)"] == f"{cm.T_block:.3f} ms"
    assert rows["predicted speedup"] == f"{cm.predicted:.2f}×"
    assert "observed speedup (end to end)" in rows


def test_compare_rows_give_differences_and_which_way_is_better():
    rows = {r["metric"]: r for r in panels.compare_rows(report("blocking"), report("pipelined"))}
    assert rows["device idle"]["verdict"] == "better"
    assert rows["device idle"]["B − A"].endswith("pp")
    assert rows["idle: host late"]["verdict"] == "better"      # pipelining hides the host
    assert rows["period"]["verdict"] == "better"
    assert rows["accidental syncs"]["verdict"] == "same"


def test_builders_take_a_report_without_a_trace_window():
    tr = sample("pipelined")
    rep = analyze(tr, window=(tr.device_spans[0].t0, tr.device_spans[-1].t1))
    fig = timeline_figure(prepare_timeline(tr, rep))
    assert fig.layout.meta["bubbles"] == len(rep.bubbles)
    empty = prepare_timeline(tr, None)
    assert timeline_figure(empty).layout.meta["bubbles"] == 0
