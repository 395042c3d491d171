"""Callbacks of the Panels and Compare tabs."""
from __future__ import annotations

import dash
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from photon_trace.dashboard.callbacks.timeline import LIVE, ZOOM_FILTER
from photon_trace.dashboard.layout import SMALL, error_box, section, table
from photon_trace.dashboard.panels import cost_model_pair, figures
from photon_trace.dashboard.panels.device_ops import device_finding_lines, device_op_rows
from photon_trace.dashboard.panels.compare import comparison_of, validity_text
from photon_trace.dashboard.panels import ranks as rank_tables
from photon_trace.dashboard.panels.idle_views import idle_view_rows, rule_detail_rows, rule_rows
from photon_trace.dashboard.panels.stats import idle_breakdown, idle_breakdown_figure
from photon_trace.dashboard.sources.store import Loaded
from photon_trace.dashboard.timeline.figure import compare_figure, placeholder_figure
from photon_trace.dashboard.timeline.view import View, x_range_from_relayout

BUBBLE_ROWS = 100
VALIDITY = {"color": "#b00020", "fontWeight": 600, "fontSize": "13px"}   # a pair the machine made incomparable


def panel_children(loaded: Loaded) -> list:
    r = loaded.report
    n_bubbles = len(r.bubbles or [])
    shown = min(n_bubbles, BUBBLE_ROWS)
    left = html.Div(style={"flex": "1 1 640px", "minWidth": "0"}, children=[
        section("Diagnosis: what host code can fix first, then the host not running, then device-side latency",
                table(figures.diagnosis_rows(r), "diagnosis-table", "no bubbles in the window")),
        section("Idle per device stream (HTA-style breakdown)",
                dcc.Graph(id="idle-breakdown", figure=idle_breakdown_figure(idle_breakdown(loaded.timeline)),
                          config={"displayModeBar": False}),
                help_text="Each stream's analysis window split into busy, idle before the next op was enqueued "
                          "(on the analysed stream the host was late; on another stream, such as the copy "
                          "stream, it had no work) and idle after it was enqueued (the device's launch latency)."),
        section("Idle per stream (ours) and per device (Nsight's: all its streams together)",
                table(idle_view_rows(r), "idle-views-table", "no device ops in the window"),
                help_text="A stream is idle between its own ops; a device only while none of its streams runs. "
                          "On a program with overlapping streams the two differ a lot, and both are true."),
        section("Accidental syncs by call site", table(figures.sync_rows(r), "sync-table", "no accidental syncs")),
        device_section(r),
        section("Idle by cause", table(figures.bubble_cause_totals(r), "cause-table", "no bubbles")),
        *rule_sections(loaded),
    ])
    right = html.Div(style={"flex": "1 1 560px", "minWidth": "0"}, children=[
        section(f"Bubbles, costliest first ({shown} of {n_bubbles:,}; click a row to see it)",
                html.Div(table(figures.bubble_rows(r, loaded.timeline.origin, BUBBLE_ROWS), "bubble-table",
                               "no bubbles", clickable=True),
                         style={"maxHeight": "420px", "overflowY": "auto"})),
    ])
    return rank_sections(loaded) + [html.Div([left, right], style={"display": "flex", "gap": "28px",
                                                                    "flexWrap": "wrap"})]


def device_section(r) -> html.Div:
    """Device time per op, and above it the device-side findings (an op's slow tail): the device's
    own, apart from the diagnosis of what host code can fix."""
    findings = [html.Div(f"Device-side: {words}", style={"fontWeight": "bold"}) for words in device_finding_lines(r)]
    return section("Device time per op (device-side: not fixable from host code)",
                   *findings, table(device_op_rows(r), "device-ops-table", "no device ops in the window"),
                   help_text="Each op's durations in the window: the median and the slow ones (p90, p99), and "
                             "the time its runs spent above the median. An op whose time above the median is "
                             "a fifth of all device time or more is a device-side finding: the device was "
                             "slow, not idle, and no bubble shows it.")


def rank_sections(loaded: Loaded) -> list:
    """A distributed job's tables across ranks, above the analysed stream's (rank 0's unless chosen)."""
    rr = loaded.ranks
    if rr is None:
        return []
    return [html.Div(id="rank-panels", children=[
        section(f"Ranks ({len(rr.ranks)}): each rank's own analysis",
                table(rank_tables.rank_rows(rr), "rank-table"), html.Div(rr.alignment_text(), style=SMALL),
                help_text="Each rank analysed as a single trace would be; the tables below are across ranks. The "
                          "diagnosis and bubbles further down are the analysed stream's (the first rank's)."),
        section("Per step, the slowest rank",
                table(rank_tables.step_rows(rr), "rank-step-table", "no step that two ranks ran"),
                help_text="Each rank's step time, and its work: that time less its waits in collectives for the "
                          "others. Collectives make every rank's step as long as the slowest's; the rank with "
                          "the most work is the one the others waited for."),
        section("Collectives: waiting for the last rank against the transfer",
                table(rank_tables.wait_rows(rr), "rank-wait-table", "no collective matched across ranks"),
                table(rank_tables.collective_rows(rr), "collective-table", ""),
                help_text="A collective cannot finish before every rank has reached it: each rank's kernel waits "
                          "for the last to arrive, then moves the data (the transfer)."),
    ])]


def rule_sections(loaded: Loaded) -> list:
    """nsys analyze's expert rules on this trace, under nsys's names, and the rows of those that found any."""
    from photon_trace.telemetry.analysis.gpu_rules import expert_rules
    rules = expert_rules(loaded.trace)
    if not rules:
        return []
    out = [section("nsys analyze's expert rules (nsys's names and defaults)",
                   table(rule_rows(rules), "rules-table"),
                   help_text="Nsight Systems' own rules, reproduced: what nsys analyze would list for this trace. "
                             "Our analysis above says which host code made each gap and what removing it buys.")]
    for rule in rules:
        if rule.count:
            out.append(html.Div([html.Div(f"{rule.name}: {rule.title}", style=SMALL),
                                 table(rule_detail_rows(rule, origin_ns=loaded.timeline.origin),
                                       f"rule-{rule.name}")], style={"margin": "4px 0 8px"}))
    return out


def register(app: dash.Dash, state) -> None:
    @app.callback(Output("steps-fig", "figure"), Output("panel-tables", "children"),
                  Input("trace-a", "value"), Input("tabs", "value"), Input("live-version", "data"),
                  State("view-a", "data"))
    def render_panels(path, tab, _version, view):
        if tab != "panels":
            raise PreventUpdate  # drawn when first looked at, not on every page load
        loaded, err = state.get(path, (view or {}).get("version") if path == LIVE else None)
        if loaded is None:
            return placeholder_figure(err or "no trace"), []
        return figures.step_series_figure(loaded.report), panel_children(loaded)

    def compare_parts(a: Loaded, b: Loaded, view: View):
        return compare_figure(a.timeline, b.timeline, view, labels=(f"A · {a.label}", f"B · {b.label}"))

    @app.callback(Output("compare-timeline", "figure"), Output("compare-summary", "children"),
                  Output("cost-model", "children"), Output("compare-error", "children"),
                  Input("trace-a", "value"), Input("trace-b", "value"), Input("tabs", "value"))
    def render_compare(pa, pb, tab):
        if tab != "compare":
            raise PreventUpdate
        if not pb:
            return placeholder_figure("pick trace B to compare"), [], [], []
        (a, ea), (b, eb) = state.get(pa), state.get(pb)
        if a is None or b is None:
            msg = "; ".join(e for e in (ea and f"A: {ea}", eb and f"B: {eb}") if e)
            return placeholder_figure("cannot compare"), [], [], error_box(msg)
        headers = (a.trace.header, b.trace.header)
        ok, why = cost_model_pair.cost_model_applies(a.report, b.report, headers, (pa == LIVE, pb == LIVE))
        if ok:
            blocking, pipelined, note = cost_model_pair.blocking_and_pipelined(a.report, b.report, headers)
            try:
                cm = state.store.cost_model(blocking, pipelined)
                cost = [section("Cost model", html.Div(note, style=SMALL),
                                table(cost_model_pair.cost_model_rows(cm), "cost-model-table")),
                        dcc.Graph(figure=cost_model_pair.cost_model_figure(cm), config={"displayModeBar": False})]
            except Exception as e:  # a pair the model cannot take (e.g. empty windows) is not fatal
                cost = error_box(f"cost model unavailable: {type(e).__name__}: {e}")
        else:
            cost = [section("Cost model", html.Div(f"not shown: {why}.", id="cost-model-why", style=SMALL))]
        c = comparison_of(a.report, b.report, headers)
        summary = section("Summary: A vs B", html.Div(f"A = {a.label}    B = {b.label}", style=SMALL),
                          html.Div(validity_text(c), id="compare-validity",
                                   style=VALIDITY if c is not None and not c.valid else SMALL),
                          html.Div(figures.NOISE_NOTE, style=SMALL, id="noise-note"),
                          table(figures.compare_rows(a.report, b.report, c), "compare-table"))
        return compare_parts(a, b, View()), summary, cost, []

    app.clientside_callback(ZOOM_FILTER, Output("zoom-compare", "data"), Input("compare-timeline", "relayoutData"),
                            prevent_initial_call=True)

    @app.callback(Output("compare-timeline", "figure", allow_duplicate=True),
                  Input("zoom-compare", "data"), State("trace-a", "value"), State("trace-b", "value"),
                  prevent_initial_call=True)
    def zoom_compare(relayout, pa, pb):
        kind, rng = x_range_from_relayout(relayout)
        if kind is None or not pb:
            raise PreventUpdate
        (a, _), (b, _) = state.get(pa), state.get(pb)
        if a is None or b is None:
            raise PreventUpdate
        return compare_parts(a, b, View(rng) if kind == "range" else View())

