"""No work is not a bubble (issue 28 item 2), on hand-built traces with exact timings (µs).

The device's idle inside a ``no_work`` span (the engine had nothing to run and waited for a
request) is reported as no work: cut out of the gap it lies in (the parts outside stay bubbles,
attributed as any other), out of the idle fraction, the diagnosis and its predicted speedups.
"""
from __future__ import annotations

import pytest

from photon_trace.telemetry.analysis import OUTSIDE_PHASES, Cause, analyze, find_bubbles
from photon_trace.telemetry.analysis.gate import EXIT_FAIL, EXIT_PASS, run_check
from photon_trace.telemetry.analysis.no_work import NoWork
from helpers.code_sites import COMMIT_SITE as COMMIT
from helpers.trace_builder import US, TraceBuilder

LATENCY = (Cause.DISPATCH, "launch latency")


def parts(trace, window) -> list[tuple]:
    return [(b.t0 // US, b.t1 // US, b.cause, b.detail) for b in find_bubbles(trace, window)]


def idle_server(no_work: tuple[int, int] | None = (1100, 1400), thread: str = "scheduler") -> TraceBuilder:
    """forward(1) on [0, 1000); commit(1) on [900, 1100); the engine sleeps with nothing to run
    over ``no_work``; plan(2) and launch(2) on [1400, 1490); forward(2) from 1500 (all µs)."""
    b = TraceBuilder()
    b.compute("forward", 1, 0, 1000 * US, enqueued=0)
    b.compute("forward", 2, 1500 * US, 2500 * US, enqueued=1490 * US)
    b.host("commit", 1, 900 * US, 1100 * US).host("plan", 2, 1400 * US, 1450 * US)
    b.host("launch", 2, 1450 * US, 1490 * US)
    b.wait("commit: copy-back", 950 * US, 1000 * US, expected=True, site=COMMIT, step=1)
    if no_work is not None:
        b.host("no_work", 2, no_work[0] * US, no_work[1] * US, slot=-1, thread=thread)
    return b.step(1).step(2)


WINDOW = (0, 2500 * US)


def test_a_gap_partly_in_no_work_keeps_only_its_parts_outside_as_bubbles():
    assert parts(idle_server().build(), WINDOW) == [
        (1000, 1100, Cause.HOST_BOUND, "commit"), (1400, 1450, Cause.HOST_BOUND, "plan"),
        (1450, 1490, Cause.HOST_BOUND, "launch"), (1490, 1500, *LATENCY)]
    # without the span, the same sleep reads as host code's fault (what the analysis said before)
    assert (1100, 1400, Cause.HOST_BOUND, OUTSIDE_PHASES) in parts(idle_server(None).build(), WINDOW)


def test_no_work_is_left_out_of_the_idle_fraction_and_said_apart():
    rep = analyze(idle_server().build(), WINDOW)
    assert rep.no_work_ns == 300 * US and rep.work_ns == 2200 * US
    assert rep.busy_ns + rep.idle_ns + rep.no_work_ns == rep.window_ns
    assert rep.idle_ns == 200 * US == rep.bubble_ns + rep.dispatch_ns
    assert rep.idle_fraction == pytest.approx(200 / 2200)
    assert rep.no_work_fraction == pytest.approx(300 / 2500)
    assert rep.host_idle_ns + rep.launch_idle_ns == rep.idle_ns and rep.host_idle_ns == 190 * US
    assert sum(s.idle_ns for s in rep.steps) == rep.idle_ns   # the steps' idle leaves it out too
    assert rep.to_dict()["no_work_ns"] == 300 * US


def test_the_diagnosis_has_no_row_for_no_work_and_predicts_over_the_time_with_work():
    rep = analyze(idle_server().build(), WINDOW)
    rows = {(d.cause, d.site_or_phase): d for d in rep.diagnosis}
    assert set(rows) == {(Cause.HOST_BOUND, "commit"), (Cause.HOST_BOUND, "plan"),
                         (Cause.HOST_BOUND, "launch"), LATENCY}
    assert sum(d.idle_ns for d in rep.diagnosis) == rep.bubble_ns
    # removing plan's 50 µs shortens the 2.2 ms with work by 50 µs: not the window, nor the sleep
    assert rows[(Cause.HOST_BOUND, "plan")].predicted_speedup == pytest.approx(2200 / 2150)
    # a host never late clears the gap down to the device's launch latency (10 µs here), and
    # never the sleep: 190 µs off the 2.2 ms with work
    assert rep.host_free_speedup[0] == pytest.approx(2200 / 2010)


def test_a_gap_wholly_in_no_work_is_no_bubble():
    b = TraceBuilder()
    b.compute("forward", 1, 0, 1000 * US).compute("forward", 2, 1500 * US, 2500 * US, enqueued=1500 * US)
    b.host("no_work", 2, 950 * US, 1550 * US, slot=-1).step(1).step(2)
    rep = analyze(b.build(), WINDOW)
    assert rep.bubbles == [] and rep.diagnosis == []
    assert rep.no_work_ns == 500 * US and rep.idle_ns == 0 and rep.idle_fraction == 0.0


def test_no_work_on_another_thread_and_overlapping_spans_count_once():
    b = idle_server((1100, 1300))
    b.host("no_work", 2, 1200 * US, 1400 * US, slot=-1, thread="other")
    rep = analyze(b.build(), WINDOW)
    assert rep.no_work_ns == 300 * US
    assert NoWork(b.build()).spans == [(1100 * US, 1400 * US)]


def test_an_imported_traces_span_named_no_work_is_just_a_span():
    b = idle_server()
    b.header["source"] = {"format": "kineto"}
    assert not NoWork(b.build())


def test_the_gate_measures_idle_with_work_and_states_both_figures():
    trace = idle_server().build()
    result = run_check(trace, max_idle_fraction=0.10)   # 9.1% with work; 20% of the window
    assert result.exit_code == EXIT_PASS
    gate = result.gates[0]
    assert gate.value == pytest.approx(200 / 2200)
    assert "with work (12.0% of the" in gate.message and "had no work: not gated" in gate.message
    assert "12.0% of the window had no work" in result.details()[-1]
    # the same trace without its no_work span: the sleep is idle, and the gate fails on it
    assert run_check(idle_server(None).build(), max_idle_fraction=0.10).exit_code == EXIT_FAIL


def test_the_markdown_and_junit_say_the_no_work_figure():
    from photon_trace.telemetry.analysis.gate_report import render_junit, render_markdown
    result = run_check(idle_server().build(), max_idle_fraction=0.10)
    md, junit = render_markdown(result), render_junit(result)
    assert "of the time with work; 12.0% of the window had no work" in md
    assert "had no work: not gated" in junit


def test_the_stream_and_device_rows_leave_no_work_out_too():
    b = idle_server()
    b.copy("copy_back", 1, 1000 * US, 1020 * US).copy("copy_back", 2, 2500 * US, 2520 * US)
    rep = analyze(b.build(), WINDOW)
    (compute, copy) = rep.streams
    assert compute.stream == "compute" and compute.span_ns == 2200 * US and compute.idle_ns == rep.idle_ns
    assert sum(compute.causes.values()) == compute.idle_ns
    (device,) = rep.devices
    assert device.span_ns == 2200 * US and device.idle_ns == 180 * US   # the copy-back covered 20 µs


def test_the_perfetto_export_carries_no_work_as_a_grey_slice_and_no_bubble_there():
    from photon_trace.telemetry.export.perfetto import analysed_bubbles, chrome_trace
    trace = idle_server().build()
    bubbles, window = analysed_bubbles(trace)
    events = chrome_trace(trace, bubbles, window)["traceEvents"]
    (slice_,) = [e for e in events if e.get("cat") == "no_work"]
    assert slice_["name"] == "no work" and slice_["cname"] == "grey" and slice_["dur"] == pytest.approx(300)
    start = slice_["ts"]
    assert not [e for e in events if e.get("cat") == "bubble" and e["ts"] < start + 300 and e["ts"] + e["dur"] > start]


def test_a_device_that_ran_dry_for_want_of_work_starts_late_as_its_worker_wakes_not_by_host_code():
    # As test_analysis_bubbles' dry device (a 30 µs launch latency, measured on the first steps),
    # but the engine had no work over [1100, 1400): the request came, plan(2) and launch(2) ran
    # and forward(2) started 100 µs after its enqueue. The 70 µs beyond the device's own latency
    # are its worker waking from the sleep no work let it fall into (a VM's idle core took ~4 ms
    # on a paced client's run): no host code left the device dry, so the machine's, not launch's.
    b = TraceBuilder()
    b.compute("sample", 0, 0, 100 * US, enqueued=0).compute("forward", 1, 130 * US, 1000 * US, enqueued=0)
    b.compute("sample", 1, 1030 * US, 1100 * US, enqueued=0)
    b.host("no_work", 2, 1100 * US, 1400 * US, slot=-1)
    b.host("plan", 2, 1400 * US, 1420 * US).host("launch", 2, 1420 * US, 1450 * US)
    b.compute("forward", 2, 1550 * US, 2500 * US, enqueued=1450 * US).step(0).step(1).step(2)
    got = parts(b.build(), (0, 2500 * US))
    assert got == [(100, 130, *LATENCY), (1000, 1030, *LATENCY), (1400, 1420, Cause.HOST_BOUND, "plan"),
                   (1420, 1450, Cause.HOST_BOUND, "launch"),
                   (1450, 1520, Cause.DEVICE_DESCHEDULED, "device worker waking after no work"), (1520, 1550, *LATENCY)]
    # the machine's: the idle gate leaves it out beside the no work, and says so
    rep = analyze(b.build(), (0, 2500 * US))
    assert run_check(b.build()).gates[0].message.count("descheduled") == 1 and rep.no_work_ns == 300 * US
