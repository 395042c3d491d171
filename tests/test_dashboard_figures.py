"""The dashboard's figure builders and panels, without a browser."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from photon_trace.dashboard.panels import cost_model_pair, figures
from photon_trace.dashboard.timeline.data import BUBBLE_CAUSES, bubble_name, prepare_timeline
from photon_trace.dashboard.timeline.figure import compare_figure, timeline_figure
from photon_trace.dashboard.timeline.view import View, x_range_from_relayout
from photon_trace.telemetry.analysis import Cause, analyze, cost_model
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
    """Markers of the syncs in the analysis window (those outside it are drawn apart, hollow)."""
    return sum(len(t.x) for t in by_name(fig, "accidental sync", yaxis) if t.name == "accidental sync")


def accidental_syncs(rep) -> int:
    return sum(s.count for s in rep.syncs)


@pytest.fixture(scope="module")
def mask_sync():
    tr, rep = sample("mask_sync"), report("mask_sync")
    return tr, rep, prepare_timeline(tr, rep)


def test_one_lane_per_host_thread_and_device_stream_and_a_requests_lane(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    labels = list(fig.layout.yaxis.ticktext)
    threads = list(dict.fromkeys(s.thread for s in tr.host_spans))   # in order of first appearance
    streams = {d.stream for d in tr.device_spans}
    assert labels == [f"host · {t}" for t in threads] + [f"device · {s}" for s in ("compute", "copy")
                                                         if s in streams] + ["requests"]
    assert fig.layout.meta["lanes"] == labels


def test_one_webgl_trace_per_category_with_phases_and_ops_in_their_own_colours(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    assert all(t.type == "scattergl" for t in fig.data)
    names = Counter(t.name for t in fig.data if not t.name.endswith("(hover)"))
    assert all(n == 1 for n in names.values()), names
    for phase in ("plan", "launch", "commit", "finalize"):
        assert phase in names
    for op in ("forward", "sample", "copy-back"):   # the legend's words (issue 33)
        assert op in names
    colours = {t.fillcolor for t in fig.data if t.name in ("plan", "launch", "commit", "finalize")}
    assert len(colours) == 4


def test_spans_are_filled_rectangles_separated_by_gaps(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    fig = timeline_figure(data, View(x_range=(0.0, 0.02)))      # zoomed: every forward is wider than a pixel
    forward = by_name(fig, "forward")[0]
    n_forward = len([t for t in fig.data if t.name == "forward (hover)"][0].x)
    assert forward.fill == "toself" and polygons(forward) == n_forward > 0
    x = np.asarray(forward.x, dtype=np.float64).reshape(-1)
    first = x[:5]
    assert first[0] == first[3] == first[4] and first[1] == first[2] and first[1] > first[0]


def hover_points(fig, prefix: str, yaxis: str | None = None) -> int:
    """Hover (and click) targets of exactly drawn categories: one per span in the view."""
    return sum(len(t.x) for t in fig.data if t.name and t.name.startswith(prefix) and t.name.endswith("(hover)")
               and (yaxis is None or (t.yaxis or "y") == yaxis))


def drawn_area(fig, name: str, lane: int, band: float = 0.72) -> float:
    """Area (x units × share of the lane's band) of trace ``name``'s rectangles on ``lane``."""
    area = 0.0
    for t in by_name(fig, name):
        if t.name != name or t.fill != "toself":
            continue
        x = np.append(np.asarray(t.x, dtype=np.float64), np.nan).reshape(-1, 6)
        y = np.append(np.asarray(t.y, dtype=np.float64), np.nan).reshape(-1, 6)
        on = np.abs(y[:, 0] + lane) < 0.5
        area += float(np.sum((x[on, 1] - x[on, 0]) * (y[on, 2] - y[on, 0]) / band))
    return area


def test_every_bubble_and_sync_the_analysis_reports_is_on_the_timeline(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    assert fig.layout.meta["mode"] == "exact"
    counted = sum(int(st.in_window.sum()) for st in data.sets if st.group == "bubble")
    assert counted == len(rep.bubbles) > 0
    assert hover_points(fig, "bubble: ") == len(data.bubbles) == fig.layout.meta["bubbles"]
    per_cause = Counter(b.cause for b in data.bubbles)
    for cause in BUBBLE_CAUSES:
        assert hover_points(fig, bubble_name(cause)) == per_cause.get(cause, 0)
    assert sync_marker_count(fig) == accidental_syncs(rep) == fig.layout.meta["syncs"] > 0


def test_one_vocabulary_for_causes_in_the_legend_and_the_tables(mask_sync):
    tr, rep, data = mask_sync
    legend = {t.name.removeprefix("bubble: ") for t in timeline_figure(data).data
              if t.name.startswith("bubble: ") and not t.name.endswith("(hover)")}
    bubbles = {r["cause"] for r in figures.bubble_cause_totals(rep)}
    bubbles |= {r["cause"] for r in figures.diagnosis_rows(rep) if r["idle (ms)"] != "0.000"}
    # a diagnosis row may be charged with no bubble of its own (a phase a sync's charge took all of:
    # ``analysis/charging.py``): in the vocabulary, not in the legend
    charged = {r["cause"] for r in figures.diagnosis_rows(rep)}
    assert legend and bubbles <= legend <= {c.label for c in Cause} and charged <= {c.label for c in Cause}


def test_bubbles_are_never_widened_and_narrow_spans_are_drawn_as_their_share_of_a_pixel_column(mask_sync):
    """Overview honesty: drawn area equals busy time (up to the 1/64 height steps), for the
    bubbles (no 3-px minimum) and for the copy lane's sub-pixel copies (not an empty lane)."""
    tr, rep, data = mask_sync
    view = View(width_px=1600)
    fig = timeline_figure(data, view)
    lo, hi = fig.layout.meta["x_range"]
    col = (hi - lo) / view.width_px
    copy_lane = [ln.name for ln in data.lanes].index("copy")
    copies = [d for d in tr.device_spans if d.stream == "copy" and d.op == "copy_back"]
    assert max(d.t1 - d.t0 for d in copies) / 1e9 < col        # every copy-back is under a pixel here
    for name, lane, spans in (("copy-back", copy_lane, [(d.t0, d.t1) for d in copies]),
                              (bubble_name("accidental_sync"), data.compute_lane,
                               [(b.t0, b.t1) for b in data.bubbles if b.cause == "accidental_sync"])):
        true = sum(t1 - t0 for t0, t1 in spans) / 1e9
        drawn = drawn_area(fig, name, lane)
        blocks = len(by_name(fig, name)[0].x) // 6 + 1
        assert drawn > 0
        assert abs(drawn - true) <= blocks * 8 * col * 1.5 / 64 + 1e-12, (name, drawn, true)


def test_blocking_run_shades_its_commit_waits_and_has_no_sync_markers():
    rep = report("blocking")
    data = prepare_timeline(sample("blocking"), rep)
    fig = timeline_figure(data)
    assert hover_points(fig, "bubble: ") == len(data.bubbles) >= len(rep.bubbles)
    assert by_name(fig, bubble_name("commit_wait"))
    assert sync_marker_count(fig) == 0


def test_sync_marker_hover_gives_site_wait_and_idle_caused(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    markers = [t for t in fig.data if t.name == "accidental sync"][0]
    site = rep.syncs[0].site
    assert all(site in t for t in markers.text)
    assert "site" in markers.hovertemplate and "idle caused" in markers.hovertemplate
    cd = np.asarray(markers.customdata, dtype=np.float64)
    assert math.isclose(cd[:, 1].sum() * 1e9, sum(s.wait_ns for s in rep.syncs), rel_tol=1e-6)
    assert math.isclose(cd[:, 2].sum() * 1e9, sum(s.idle_ns for s in rep.syncs), rel_tol=1e-6)


def test_each_sync_is_linked_to_the_bubbles_it_caused(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    links = by_name(fig, "sync → the bubble it caused")
    caused = [b for b in data.bubbles if b.cause == "accidental_sync"]
    assert links and polygons_or_lines(links[0]) == len(caused) == len(data.syncs.link_bubble)


def polygons_or_lines(trace) -> int:
    x = np.asarray(trace.x, dtype=np.float64)
    return int(np.isnan(x).sum()) + 1 if len(x) else 0


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
    assert np.allclose(cd[:, 3], [(d.t1 - d.t0) / 1e9 for d in fwd])            # seconds
    assert np.allclose(cd[:, 5], [(d.t0 - rep.window[0]) / 1e9 for d in fwd])   # start, s


def test_host_waits_and_step_boundaries_are_drawn(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    assert hover_points(fig, "wait: accidental") == sum(1 for w in tr.waits if not w.expected)
    assert by_name(fig, "step boundaries")
    starts = [t for t in fig.data if t.name == "step starts"][0]
    assert len(starts.x) == len({s.step for s in tr.host_spans if s.phase == "launch"})


def test_axis_is_linear_seconds_with_adaptive_units_from_the_window_start(mask_sync):
    tr, rep, data = mask_sync
    fig = timeline_figure(data)
    assert fig.layout.xaxis.type in (None, "linear")
    assert fig.layout.xaxis.tickformat == "~s" and fig.layout.xaxis.ticksuffix == "s"   # 500µs, 12ms, 2s
    forward = sorted((d for d in tr.device_spans if d.op == "forward"), key=lambda d: d.t0)[0]
    x = np.asarray(by_name(fig, "forward")[0].x, dtype=np.float64)
    assert math.isclose(np.nanmin(x), (forward.t0 - rep.window[0]) / 1e9, abs_tol=1e-9)


def test_the_trace_axis_matches_the_perfetto_export_and_the_step_axis_labels_steps(mask_sync):
    from photon_trace.telemetry.export.perfetto import chrome_trace
    tr, rep, data = mask_sync
    ev = [e for e in chrome_trace(tr)["traceEvents"] if e.get("ph") == "X" and e.get("name") == "forward"]
    fig = timeline_figure(data, View(axis="trace"))
    hover = [t for t in fig.data if t.name == "forward (hover)"][0]
    starts_s = sorted(np.asarray(hover.customdata, dtype=np.float64)[:, 5])
    assert np.allclose(starts_s, sorted(e["ts"] / 1e6 for e in ev), atol=1e-9)   # Perfetto ts is µs
    steps = timeline_figure(data, View(axis="step")).layout.xaxis
    assert steps.tickmode == "array" and set(steps.ticktext) <= {str(s) for s in data.step_ids}
    assert 2 <= len(steps.ticktext) <= 13


@pytest.fixture(scope="module")
def long_data():
    tr = sample("long")
    return tr, prepare_timeline(tr, report("long"))


def test_a_long_trace_is_drawn_per_pixel_column_with_bounded_points(long_data):
    tr, data = long_data
    assert span_count(tr) >= 60_000
    view = View(width_px=1600)
    fig = timeline_figure(data, view)
    meta = fig.layout.meta
    assert meta["mode"] == "aggregate" and meta["spans_visible"] == data.n_spans
    columns = view.width_px / view.column_px
    for t in fig.data:
        if t.fill == "toself" and not t.name.startswith("requests"):
            assert polygons(t) <= columns * len(data.lanes)
    points = sum(len(t.x) for t in fig.data)
    assert points < 0.5 * 6 * span_count(tr)


def test_aggregated_compute_lane_shows_the_busy_and_idle_shares(long_data):
    tr, data = long_data
    rep = report("long")
    w = (rep.window[1] - rep.window[0]) / 1e9
    fig = timeline_figure(data, View(x_range=(0.0, w)))
    lane = data.compute_lane
    busy = sum(drawn_area(fig, n, lane) for n in ("forward", "prefill", "sample", "masked sample", "stage copy (device)"))
    assert math.isclose(busy / w, 1 - rep.idle_fraction, abs_tol=0.02)
    idle = sum(drawn_area(fig, t.name, lane) for t in fig.data if t.name.startswith("bubble: ")
               and not t.name.endswith("(hover)"))
    assert math.isclose(idle / w, rep.bubble_ns / rep.window_ns, abs_tol=0.02)


def test_zooming_draws_only_the_visible_spans_exactly(long_data):
    tr, data = long_data
    lo, hi = 1.000, 1.030
    fig = timeline_figure(data, View(x_range=(lo, hi)))
    meta = fig.layout.meta
    assert meta["mode"] == "exact"
    a, b = lo * 1e9 + data.origin, hi * 1e9 + data.origin
    visible = sum(1 for s in tr.host_spans if s.t0 <= b and s.t1 >= a) + \
        sum(1 for d in tr.device_spans if d.t0 <= b and d.t1 >= a) + \
        sum(1 for w in tr.waits if w.t0 <= b and w.t1 >= a)
    assert meta["spans_visible"] == visible < data.n_spans / 100
    for t in fig.data:
        if t.fill == "toself" and not t.name.startswith("requests"):
            x = np.asarray(t.x, dtype=np.float64)
            x = x[~np.isnan(x)].reshape(-1, 5)
            assert np.all(x.max(axis=1) >= lo - 1e-3) and np.all(x.min(axis=1) <= hi + 1e-3)
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
    da, db = prepare_timeline(a, ra), prepare_timeline(b, rb)
    fig = compare_figure(da, db, labels=("A", "B"))
    assert {t.xaxis or "x" for t in fig.data} == {"x"}
    assert {t.yaxis or "y" for t in fig.data} == {"y", "y2"}
    assert hover_points(fig, "bubble: ", "y") == len(da.bubbles)
    assert hover_points(fig, "bubble: ", "y2") == len(db.bubbles)
    assert sync_marker_count(fig, "y2") == accidental_syncs(rb) and sync_marker_count(fig, "y") == 0
    fa = np.asarray(by_name(fig, "forward", "y")[0].x, dtype=np.float64)
    fb = np.asarray(by_name(fig, "forward", "y2")[0].x, dtype=np.float64)
    assert -0.05 < np.nanmin(fa) < 0.05 and -0.05 < np.nanmin(fb) < 0.05   # both near their own zero
    legend = [t.name for t in fig.data if t.showlegend]
    assert len(legend) == len(set(legend))
    assert fig.layout.legend.y < 0      # under the axis: the A and B labels above the lanes are clear of it
    assert fig.layout.xaxis.side == "top"   # over A's lanes: on screen however many lanes (issue 33)


# --------------------------------------------------------------------- panels


def test_summary_lists_period_forward_sample_idle_tokens_and_syncs():
    rep = report("mask_sync")
    items = {i["key"]: i["value"] for i in figures.summary_items(rep)}
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
    rows = figures.bubble_rows(rep, rep.window[0], limit=1000)
    assert len(rows) == len(rep.bubbles)
    order = figures.bubble_order(rep)
    cost = [rep.bubbles[i].duration_ns for i in order]
    assert cost == sorted(cost, reverse=True)
    assert rows[0]["idle"] == figures.fmt_duration(cost[0])
    assert {r["cause"] for r in rows} <= {c.label for c in Cause}


def test_durations_use_adaptive_units():
    assert [figures.fmt_duration(x) for x in (850, 12_300, 4_560_000, 1_230_000_000, 250_000_000_000)] == \
        ["850 ns", "12.3 µs", "4.56 ms", "1.23 s", "250 s"]


def test_diagnosis_names_cause_site_and_predicted_speedup():
    rep = report("mask_sync")
    rows = figures.diagnosis_rows(rep)
    assert rows[0]["cause"] == "accidental sync"
    assert rows[0]["call site / phase"] == rep.syncs[0].site
    assert rows[0]["predicted speedup"].endswith("×") and rows[0]["who can fix it"] == "host code"


def test_diagnosis_ranks_host_fixable_causes_above_device_dispatch_even_when_dispatch_idles_more():
    from types import SimpleNamespace

    from photon_trace.telemetry.analysis import Diagnosis
    rep = SimpleNamespace(diagnosis=[Diagnosis("dispatch", "queued op started late", 9_500_000, 0.63, 1.05),
                                     Diagnosis("accidental_sync", "engine/engine.py:168", 5_600_000, 0.37, 1.03)])
    rows = figures.diagnosis_rows(rep)
    assert [r["cause"] for r in rows] == ["accidental sync", "device dispatch"]
    assert [r["who can fix it"] for r in rows] == ["host code", "device-side latency"]


def test_every_card_and_column_has_a_definition():
    from photon_trace.dashboard.glossary import define
    from photon_trace.dashboard.panels.stats import idle_breakdown, range_stats
    rep = report("mask_sync")
    data = prepare_timeline(sample("mask_sync"), rep)
    headers = set()
    for rows in (figures.diagnosis_rows(rep), figures.sync_rows(rep), figures.bubble_cause_totals(rep),
                 figures.bubble_rows(rep, 0), figures.compare_rows(rep, rep),
                 cost_model_pair.cost_model_rows(cost_model(report("blocking"), report("pipelined"))),
                 range_stats(data, *rep.window)["rows"], range_stats(data, *rep.window)["idle_rows"]):
        headers |= {c for r in rows for c in r}
    labels = {i["label"] for i in figures.summary_items(rep)}
    missing = sorted(h for h in headers | labels if not define(h))
    assert not missing, missing
    assert idle_breakdown(data)


def test_period_and_idle_figure_has_series_and_histograms():
    rep = report("blocking")
    fig = figures.step_series_figure(rep)
    kinds = [t.type for t in fig.data]
    assert kinds.count("scatter") == 2 and kinds.count("bar") == 2            # histograms binned here
    assert "scattergl" not in kinds    # a few thousand points at most: SVG, no second WebGL context
    assert len(fig.data[0].x) == len(rep.steps)
    assert sum(fig.data[2].y) == np.isfinite([s.period_ns for s in rep.steps]).sum()
    titles = {fig.layout[k].title.text for k in fig.layout if k.startswith(("xaxis", "yaxis"))}
    assert {"period (ms)", "idle per step (ms)", "steps"} <= titles     # histogram axes say what they count


def test_cost_model_panel_orders_the_pair_by_depth():
    blocking, pipelined = report("blocking"), report("pipelined")
    b, p, note = cost_model_pair.blocking_and_pipelined(pipelined, blocking)
    assert b is blocking and p is pipelined and "B is the blocking" in note
    cm = cost_model(b, p)
    rows = {r["quantity"]: r["value"] for r in cost_model_pair.cost_model_rows(cm)}
    assert rows["T_block (blocking period)"] == f"{cm.T_block:.3f} ms"
    assert rows["predicted speedup"] == f"{cm.predicted:.2f}×"
    assert "observed speedup (end to end)" in rows


def test_compare_rows_give_differences_and_which_way_is_better():
    rows = {r["metric"]: r for r in figures.compare_rows(report("blocking"), report("pipelined"))}
    assert rows["device idle"]["verdict"] == "better"
    assert rows["device idle"]["B − A"].endswith("pp")
    assert rows["idle: host late"]["verdict"] == "better"      # pipelining hides the host
    assert rows["period"]["verdict"] == "better"
    assert rows["accidental syncs"]["verdict"] == "same"


def test_a_difference_inside_the_noise_band_is_not_called_worse():
    import dataclasses
    a = report("pipelined")
    b = dataclasses.replace(a, period_ms=a.period_ms * 1.007, idle_fraction=a.idle_fraction + 0.004,
                            tokens_per_s=a.tokens_per_s * 0.993)
    rows = {r["metric"]: r for r in figures.compare_rows(a, b)}
    assert {rows[m]["verdict"] for m in ("period", "device idle", "tokens/s")} == {"within noise"}
    worse = dataclasses.replace(a, period_ms=a.period_ms * 1.2)
    assert {r["metric"]: r for r in figures.compare_rows(a, worse)}["period"]["verdict"] == "worse"


def test_the_cost_model_applies_only_to_a_blocking_and_a_pipelined_run_of_one_workload():
    h = {k: sample(k).header for k in ("blocking", "pipelined", "mask_sync")}
    r = {k: report(k) for k in h}
    assert cost_model_pair.cost_model_applies(r["blocking"], r["pipelined"], (h["blocking"], h["pipelined"])) == (True, "")
    ok, why = cost_model_pair.cost_model_applies(r["pipelined"], r["mask_sync"], (h["pipelined"], h["mask_sync"]))
    assert not ok and "depths 2 and 2" in why                       # sync vs async upload: not this model's pair
    ok, why = cost_model_pair.cost_model_applies(r["blocking"], r["mask_sync"], (h["blocking"], h["mask_sync"]))
    assert not ok and "mask_upload_bug" in why                      # not the same workload
    ok, why = cost_model_pair.cost_model_applies(r["blocking"], r["pipelined"], (h["blocking"], h["pipelined"]), (True, False))
    assert not ok and "live" in why


def test_builders_take_a_report_without_a_trace_window():
    tr = sample("pipelined")
    rep = analyze(tr, window=(tr.device_spans[0].t0, tr.device_spans[-1].t1))
    fig = timeline_figure(prepare_timeline(tr, rep))
    assert fig.layout.meta["bubbles"] == len(rep.bubbles)
    empty = prepare_timeline(tr, None)
    assert timeline_figure(empty).layout.meta["bubbles"] == 0


def test_a_long_per_step_series_keeps_every_buckets_extremes():
    x = np.arange(50_000)
    y = np.sin(x / 500.0)
    y[31_337] = 9.0                                    # one spike
    ex, ey = figures.envelope(x, y)
    assert len(ex) <= 2 * figures.ENVELOPE_BUCKETS and list(ex) == sorted(ex)
    assert 9.0 in ey and ey.min() == y.min()


def test_the_docs_glossary_names_every_card():
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "docs" / "observability.md").read_text()
    glossary = page[page.index("## Glossary"):]
    glossary = glossary[:glossary.index("\n## ", 1)]
    for label in ("period", "bookkeeping", "device idle", "idle: host late", "accidental sync", "who can fix it",
                  "predicted speedup", "analysis window", "pixel column", "within noise", "p99"):
        assert f"| {label}" in glossary or f", {label}" in glossary, label


def test_a_short_traces_step_axes_tick_whole_steps_only():
    """Issue 33 item 2: a 2-step trace got ticks at 1.5; steps are whole numbers."""
    from types import SimpleNamespace
    steps = [SimpleNamespace(step=s, period_ns=5e6 + s, idle_ns=1e5) for s in (7, 8)]
    fig = figures.step_series_figure(SimpleNamespace(steps=steps, period_ms=5.0))
    for ax in (fig.layout.xaxis, fig.layout.xaxis3):
        assert list(ax.tickvals) == [7, 8] and ax.tickformat == "d"
    many = [SimpleNamespace(step=s, period_ns=5e6, idle_ns=1e5) for s in range(200)]
    fig = figures.step_series_figure(SimpleNamespace(steps=many, period_ms=5.0))
    assert fig.layout.xaxis.tickvals is None and fig.layout.xaxis.tickformat == "d"
