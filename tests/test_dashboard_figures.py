"""The dashboard's timeline figures without a browser (its panels: test_dashboard_panels.py)."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from photon_trace.dashboard.panels import figures
from photon_trace.dashboard.timeline.data import BUBBLE_CAUSES, bubble_name, prepare_timeline
from photon_trace.dashboard.timeline.figure import compare_figure, timeline_figure
from photon_trace.dashboard.timeline.view import View, x_range_from_relayout
from photon_trace.telemetry.analysis import Cause
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
