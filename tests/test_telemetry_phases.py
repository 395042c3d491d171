"""The phase names every layer reads from a trace come from the tracer's ``Phase``: the recorder
writes them, and the analysis, the exports and the dashboard sort and colour by them."""
from __future__ import annotations

from photon_trace.dashboard.timeline.data import COLOURS, PHASE_COLOURS, phase_set_name
from photon_trace.telemetry.recording.profiler_ranges import STEP_ANNOTATION
from photon_trace.telemetry.trace.lanes import host_phases
from photon_trace.telemetry.trace.records import Trace
from photon_trace.telemetry.tracer import SUB_PHASES, TOP_PHASES, Phase

# The serialised form: the host span names in every trace file written so far.
NAMES = ["plan", "launch", "commit", "finalize", "stage", "mask_build", "mask_upload", "stream_out", "no_work",
         "serve"]


def test_each_phase_keeps_its_span_name_and_the_top_phases_come_first():
    assert [p.span_name for p in Phase] == NAMES
    assert TOP_PHASES == ("plan", "launch", "commit", "finalize")
    assert SUB_PHASES == ("stage", "mask_build", "mask_upload", "stream_out")
    assert [p.top for p in Phase] == [True] * 4 + [False] * 6
    assert [p.sub for p in Phase] == [False] * 4 + [True] * 4 + [False] * 2   # no_work, serve: neither
    assert STEP_ANNOTATION == "launch"


def test_our_traces_count_the_top_phases_and_an_imported_trace_its_own():
    assert host_phases(Trace({})) == frozenset(TOP_PHASES)
    assert host_phases(Trace({"host_phases": ["aten::mm", "ProfilerStep#1"]})) == {"aten::mm", "ProfilerStep#1"}


def test_the_dashboard_has_a_colour_for_every_phase():
    assert set(PHASE_COLOURS) == set(Phase)
    assert all(phase_set_name(p.span_name, p.sub) in COLOURS for p in Phase)
    assert phase_set_name("stage", True) == "host stage" and phase_set_name("plan", False) == "plan"
