"""Ops that overlap on one stream are a real program's (programmatic dependent launch, a graph's
parallel nodes), counted and shown; only impossible orders are bad input.

Hand-built traces (``KinetoBuilder``) with ns timestamps, as PyTorch 2.x writes them on Hopper and
Blackwell; and the small real A100 trace with one kernel lengthened into its successor.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers.kineto_builder import KinetoBuilder

from photon_trace.cli import main as cli
from photon_trace.telemetry.analysis import analyze
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, run_check
from photon_trace.telemetry.trace.importers import load_any
from photon_trace.telemetry.trace.importers.kineto_order import EITHER, GRAPH_NODES, PDL
from photon_trace.telemetry.trace.importers.kineto_read import KinetoFormatError, KinetoPartialWarning

SYNC = Path(__file__).parent / "data" / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz"
STREAM = "gpu0 stream 7"


def pdl_trace(tmp_path: Path, overlaps_us: list[float], call: str = "cudaLaunchKernelExC") -> tuple[Path, list]:
    """One ProfilerStep of kernels on stream 7, each starting ``overlaps_us[i]`` before the previous
    one ends (negative: a gap); float µs with ns resolution. Returns the file and the kernels' spans."""
    b = KinetoBuilder()
    t, end, spans = 1_000.0, 1_100.0, []
    b.annotation("ProfilerStep#3", 990.0, 2_000.0)
    for i, ov in enumerate([0.0] + overlaps_us):
        start = end - ov if i else end
        dur = 40.125
        b.launch(f"kernel_{i}", 7, t, 4.5, start, dur, call=call)
        spans.append((start, start + dur))
        t += 5.0
        end = start + dur
    return b.write(tmp_path / "pdl.pt.trace.json.gz", baseTimeNanoseconds=1_700_000_000_000_000_000), spans


def union_us(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, None
    for a, b in sorted(spans):
        if reach is None or a >= reach:
            total += b - a
            reach = b
        elif b > reach:
            total += b - reach
            reach = b
    return total


def test_kernels_overlapping_on_a_stream_import_and_are_counted(tmp_path, capsys):
    path, spans = pdl_trace(tmp_path, [2.048, 3.7, -5.0, 0.5, 1.25])
    trace = load_any(path)                                   # strict: no error
    o = trace.header["source"]["stream_overlaps"][STREAM]
    assert (o["pairs"], o["max_ns"], o["how"]) == (4, 3_700, PDL)
    assert "starts 3.700 µs before event" in o["first"] or "starts 2.048 µs before event" in o["first"]
    # busy is the union of the kernels: the overlaps counted once
    r = analyze(trace)
    assert r.busy_ns == round(union_us(spans) * 1000)
    assert cli(["import", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 kernel pairs overlap on gpu0 stream 7, up to 3.7 µs: programmatic dependent launch" in out
    checked = run_check(path, max_idle_fraction=1.0)
    assert checked.exit_code != EXIT_BAD_INPUT
    assert any("4 kernel pairs overlap" in n for n in checked.notes)


def test_overlaps_within_the_clock_resolution_are_rounding_not_counted(tmp_path):
    b = KinetoBuilder()          # integer µs: one microsecond of overlap is what rounding makes
    b.annotation("ProfilerStep#1", 990, 200)
    b.launch("a", 7, 1000, 4, 1010, 20)
    b.launch("b", 7, 1005, 4, 1029, 20)
    trace = load_any(b.write(tmp_path / "round.json"))
    assert trace.header["source"]["stream_overlaps"] == {}


def test_a_graphs_parallel_nodes_are_named_as_such(tmp_path):
    path, _ = pdl_trace(tmp_path, [10.0, 12.0], call="cudaGraphLaunch")
    o = load_any(path).header["source"]["stream_overlaps"][STREAM]
    assert o["how"] == GRAPH_NODES and o["pairs"] == 2
    path, _ = pdl_trace(tmp_path, [10.0], call="cudaLaunchKernel")
    assert load_any(path).header["source"]["stream_overlaps"][STREAM]["how"] == EITHER


def test_the_real_trace_with_a_kernel_running_into_the_next_imports(tmp_path):
    doc = json.loads(gzip.decompress(SYNC.read_bytes()))
    doc["traceEvents"][15]["dur"] = 45          # the reduce kernel now ends 4 µs after kernel 19 starts
    p = tmp_path / "overlap.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    trace = load_any(p)
    o = trace.header["source"]["stream_overlaps"][STREAM]
    assert o["pairs"] == 1 and o["max_ns"] == 1_000   # kernel 19 lasts 1 µs, all of it beside the other
    assert o["first"].startswith("event 19 ") and "starts 4.000 µs before event 15" in o["first"]
    assert len(trace.device_spans) == 5


def test_an_op_starting_before_its_own_launch_is_bad_input(tmp_path, capsys):
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 990.0, 200.0)
    b.launch("fine", 7, 1000.0, 4.0, 1010.0, 20.0)
    b.launch("early", 7, 1040.0, 4.0, 1035.5, 20.0)       # 4.5 µs before its cudaLaunchKernel
    path = b.write(tmp_path / "early.json")
    with pytest.raises(KinetoFormatError, match=r"event \d+ \(kernel 'early'\): starts 4\.500 µs before its own "
                                                r"launch \(event \d+, cudaLaunchKernel\)"):
        load_any(path)
    assert cli(["import", str(path)]) == 2
    assert "starts 4.500 µs before its own launch" in capsys.readouterr().err
    assert run_check(path).exit_code == EXIT_BAD_INPUT
    with pytest.warns(KinetoPartialWarning, match="skipped 1 device op \\(impossible order\\)"):
        partial = load_any(path, strict=False)
    assert [d.op for d in partial.device_spans] == ["fine"]
    assert "impossible order" in partial.header["source"]["problems"]


def test_a_start_within_the_clock_resolution_of_its_launch_is_not_impossible(tmp_path):
    b = KinetoBuilder()          # integer µs: a kernel "1 µs before" its call is within the resolution
    b.annotation("ProfilerStep#1", 990, 200)
    b.launch("k", 7, 1000, 4, 999, 20)
    assert len(load_any(b.write(tmp_path / "res.json")).device_spans) == 1
