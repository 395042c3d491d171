"""Device time as a finding (``analysis/device_spread.py``), on hand-built traces with exact
timings: each op's spread, the device-side row when a slow tail costs device time, how ``check``
says it, and the per-op comparison with a baseline. The same through the real engine, with the
device worker slowed: ``test_faults_device.py``."""
from __future__ import annotations

import json

from helpers.trace_builder import MS, US, TraceBuilder, pipelined_trace
from photon_trace.dashboard.panels.device_ops import device_finding_lines, device_op_rows
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.device_spread import TAIL_SHARE, compare_ops, device_findings, op_spreads
from photon_trace.telemetry.analysis.gate import run_check


def twelve_forwards() -> TraceBuilder:
    """12 steps: a forward of 1 ms (3 ms every 4th step) and a sample of 0.5 ms each."""
    b = TraceBuilder()
    t = 0
    for s in range(12):
        f = 3 * MS if s % 4 == 3 else 1 * MS
        b.compute("forward", s, t, t + f).compute("sample", s, t + f, t + f + 500 * US).step(s)
        t += f + 500 * US + 100 * US
    return b


def test_each_op_has_its_quantiles_total_and_time_above_the_median():
    trace = twelve_forwards().build()
    spreads = {s.op: s for s in op_spreads(trace, (0, 10**12))}
    f = spreads["forward"]
    # nearest rank: p50 the 6th of 12 (1 ms), p90 the 11th and p99 the 12th (3 ms)
    assert (f.count, f.p50_ns, f.p90_ns, f.p99_ns, f.total_ns) == (12, 1 * MS, 3 * MS, 3 * MS, 18 * MS)
    assert f.tail_ns == 3 * 2 * MS                 # three runs 2 ms above the median
    assert f.tail_share == 6 / 24                  # of 18 ms forward + 6 ms sample
    assert (f.slow, f.slow_p50_ns) == (3, 3 * MS)
    s = spreads["sample"]
    assert (s.count, s.p50_ns, s.tail_ns, s.tail_share) == (12, 500 * US, 0, 0.0)
    # an op clipped by the window is not counted: its duration there is not its own
    assert {x.op: x.count for x in op_spreads(trace, (0, 1400 * US))} == {"forward": 1}


def test_a_slow_tail_over_the_threshold_is_a_device_side_row_in_words():
    (finding,) = device_findings(op_spreads(twelve_forwards().build(), (0, 10**12)))
    assert (finding.op, finding.every, finding.factor, finding.share) == ("forward", 4.0, 3.0, 0.25)
    assert finding.words == "forward: 1 step in 4 takes 3.0x the median, 25% of device time"
    # the same tail under the threshold is no finding: one slow forward in twelve, 2 ms longer
    b = TraceBuilder()
    t = 0
    for s in range(12):
        f = 3 * MS if s == 5 else 1 * MS
        b.compute("forward", s, t, t + f).compute("sample", s, t + f, t + f + 500 * US)
        t += f + 600 * US
    spreads = op_spreads(b.build(), (0, 10**12))
    assert 0 < spreads[0].tail_share < TAIL_SHARE and device_findings(spreads) == []


def test_the_report_check_and_dashboard_say_the_device_side_finding(tmp_path):
    slow = pipelined_trace(streams=2, tokens=24, slow_forward_every=4, slow_forward_ns=4 * MS)
    rep = analyze(slow)
    fwd = next(s for s in rep.device_ops if s.op == "forward")
    # the simulator's forward is 2 ms; every 4th decode forward 6 ms
    assert (fwd.p50_ns, fwd.p90_ns, fwd.slow_p50_ns) == (2 * MS, 6 * MS, 6 * MS)
    w0, w1 = rep.window
    device_time = sum(d.t1 - d.t0 for d in slow.device_spans if w0 <= d.t0 and d.t1 <= w1)
    assert fwd.tail_ns == fwd.slow * 4 * MS and fwd.tail_share == fwd.tail_ns / device_time
    (finding,) = rep.device_findings
    assert finding.words == f"forward: 1 step in 4 takes 3.0x the median, {fwd.tail_share:.0%} of device time"
    assert json.loads(json.dumps(rep.to_dict()))["device_findings"][0]["words"] == finding.words
    # it is no bubble: the diagnosis of what host code can fix does not hold it
    assert all(d.site_or_phase != "forward" for d in rep.diagnosis)
    md = tmp_path / "check.md"
    result = run_check(slow, out_md=md)
    assert f"device-side: {finding.words}" in " ".join(result.details())
    text = md.read_text()
    assert "## Device-side: slow tails" in text and f"- `{finding.words}`" in text
    # the dashboard's table and its finding
    assert device_finding_lines(rep) == [finding.words]
    row = next(r for r in device_op_rows(rep) if r["op"] == "forward")
    assert (row["p50 (ms)"], row["p90 (ms)"]) == ("2.000", "6.000")
    # a clean run of the same workload has none
    clean = analyze(pipelined_trace(streams=2, tokens=24))
    assert clean.device_findings == [] and "device-side" not in " ".join(run_check(pipelined_trace(
        streams=2, tokens=24)).details())


def test_check_against_a_baseline_compares_each_ops_median(tmp_path):
    base = pipelined_trace(streams=2, tokens=24)
    slower = pipelined_trace(streams=2, tokens=24, forward_ns=2400 * US)     # +20% forward
    rows = {c.op: c for c in compare_ops(analyze(base).device_ops, analyze(slower).device_ops)}
    assert (rows["forward"].old_p50_ns, rows["forward"].new_p50_ns) == (2 * MS, 2400 * US)
    assert abs(rows["forward"].ratio - 1.2) < 1e-9 and rows["sample"].ratio == 1.0
    md = tmp_path / "check.md"
    result = run_check(slower, base, tolerance=0.1, out_md=md)
    said = " ".join(result.details())
    assert "forward 2.400 ms vs 2.000 ms (+20.0%, SLOWER)" in said and "sample 0.200 ms vs 0.200 ms (+0.0%)" in said
    text = md.read_text()
    assert "## Device time per op" in text and "**+20.0%**" in text
    # within the tolerance: said, not marked
    same = run_check(pipelined_trace(streams=2, tokens=24, forward_ns=2100 * US), base, tolerance=0.1)
    assert "forward 2.100 ms vs 2.000 ms (+5.0%)" in " ".join(same.details())
