"""The dashboard shows no work (issue 28 item 2): the engine's no_work spans drawn on its host
lane, full height, in their own neutral colour with a legend entry; no bubble drawn over them;
and a "no work" card beside device idle, which leaves it out."""
from __future__ import annotations

from photon_trace.dashboard.panels.figures import summary_items
from photon_trace.dashboard.timeline.data import prepare_timeline
from photon_trace.dashboard.timeline.figure import timeline_figure
from photon_trace.dashboard.timeline.palette import PHASE_COLOURS, legend_name
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.tracer import Phase
from helpers.trace_builder import US, TraceBuilder


def paced() -> tuple:
    """Two forwards 1.5 ms apart; the engine slept with nothing to run over [1.1, 1.4) ms."""
    b = TraceBuilder()
    b.compute("forward", 1, 0, 1000 * US, enqueued=0)
    b.compute("forward", 2, 1500 * US, 2500 * US, enqueued=1490 * US)
    b.host("commit", 1, 900 * US, 1100 * US).host("plan", 2, 1400 * US, 1450 * US)
    b.host("launch", 2, 1450 * US, 1490 * US)
    b.host("no_work", 2, 1100 * US, 1400 * US, slot=-1).step(1).step(2)
    trace = b.build()
    return trace, analyze(trace, (0, 2500 * US))


def test_no_work_spans_are_drawn_on_the_host_lane_in_a_neutral_colour_and_named():
    trace, report = paced()
    data = prepare_timeline(trace, report)
    (drawn,) = [s for s in data.sets if s.name == "no_work"]
    assert drawn.group == "phase" and drawn.colour == PHASE_COLOURS[Phase.NO_WORK]
    assert data.lanes[int(drawn.lane[0])].kind == "host"
    assert (int(drawn.t0[0]), int(drawn.t1[0])) == (1100 * US, 1400 * US)
    for bubbles in (s for s in data.sets if s.group == "bubble"):
        assert not ((bubbles.t0 < 1400 * US) & (bubbles.t1 > 1100 * US)).any(), bubbles.name
    names = {t.name for t in timeline_figure(data).data}
    assert legend_name("no_work") == "no work (engine idle)" in names


def test_the_summary_cards_show_the_no_work_figure_beside_device_idle():
    _, report = paced()
    cards = {c["label"]: c["value"] for c in summary_items(report)}
    assert cards["no work"] == "12.0 %" and cards["device idle"] == "9.1 %"
