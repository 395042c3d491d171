"""The dashboard's panels without a browser: the summary cards, the bubble table, the
diagnosis, definitions, the per-step series, compare rows and the cost model."""
from __future__ import annotations

import numpy as np

from photon_trace.dashboard.panels import cost_model_pair, figures
from photon_trace.dashboard.timeline.data import prepare_timeline
from photon_trace.dashboard.timeline.figure import timeline_figure
from photon_trace.telemetry.analysis import Cause, analyze, cost_model
from helpers.dashboard_samples import report, sample


def test_summary_lists_period_forward_sample_idle_tokens_and_syncs():
    rep = report("mask_sync")
    items = {i["key"]: i["value"] for i in figures.summary_items(rep)}
    assert items["period_ms"] == f"{rep.period_ms:.3f} ms"
    assert items["forward_ms"] == f"{rep.forward_ms:.3f} ms"
    assert items["sample_ms"] == f"{rep.sample_ms:.3f} ms"
    assert items["idle_fraction"] == f"{100 * rep.idle_fraction:.1f} %"
    assert items["host_idle_fraction"] == f"{100 * rep.host_idle_ns / rep.window_ns:.1f} %"
    assert items["accidental_syncs"] == f"{sum(s.count for s in rep.syncs):,}"
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
