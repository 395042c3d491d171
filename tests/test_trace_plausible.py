"""Impossible times are bad input, not data (issue 32, item 4): a kernel stamped 54 years before
the rest, times past 2**63 ns, a host op whose ts and dur were swapped, a device op naming a step
that does not exist. Each is refused on load with a message naming the record or event, so
``check`` exits 2 with it (never a verdict, never Python's raw overflow message) and the
dashboard shows it as a load error; the rule is written down in docs/traces.md.

The profiler traces are the small real A100 sync trace with one field changed (its event
indices are those of ``test_kineto_bad_input``: 11 the fill kernel, 4 a cpu op).
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from photon_trace.cli import main as cli
from photon_trace.dashboard.sources.store import LoadError, TraceStore
from photon_trace.telemetry.analysis.gate import EXIT_BAD_INPUT, run_check
from photon_trace.telemetry.trace.file import TraceFormatError, load_trace, write_trace
from photon_trace.telemetry.trace.importers import load_any
from helpers.trace_builder import pipelined_trace

ROOT = Path(__file__).resolve().parents[1]
SYNC = ROOT / "tests" / "data" / "kineto" / "critical_path_cuda_event_sync_event_sync_trace.json.gz"
US_PER_YEAR = 365.25 * 86400 * 1e6


def kineto(tmp_path: Path, name: str, change) -> Path:
    doc = json.loads(gzip.decompress(SYNC.read_bytes()))
    change(doc["traceEvents"])
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(doc))
    return p


def _kernel_in_1970(ev):
    ev[11]["ts"] = 1.5                                   # 54 years before the rest


def _past_int64(ev):
    for e in ev:                                         # every time past 2**63 ns: spread stays normal
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + 9_300_000_000_000_000


def _swapped(ev):
    ev[4]["ts"], ev[4]["dur"] = ev[4]["dur"], ev[4]["ts"]   # a 53-year cpu op starting near 0


KINETO = [("kernel_in_1970", _kernel_in_1970, r"event 11 \(kernel .*starts 5\d\.\d years before the median start"),
          ("past_2_63", _past_int64, r"event \d+ .*outside \[0, 2\*\*63\) ns"),
          ("swapped_ts_dur", _swapped, r"event 4 \(cpu_op .*(starts|ends) 5\d\.\d years")]


@pytest.mark.parametrize("name,change,says", KINETO, ids=[k[0] for k in KINETO])
def test_impossible_profiler_times_are_bad_input_naming_the_event(tmp_path, capsys, name, change, says):
    p = kineto(tmp_path, name, change)
    with pytest.raises(TraceFormatError, match=says):
        load_any(p)
    result = run_check(p)
    assert result.exit_code == EXIT_BAD_INPUT and "implausible" not in result.error, result.summary()
    assert cli(["check", str(p)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "BAD INPUT" in err and "OverflowError" not in err and "Traceback" not in err
    # the dashboard shows a damaged profiler trace as far as it is valid, the skipped event named
    # in a note, or says why there is nothing valid to show
    try:
        notes = TraceStore([tmp_path]).get(p).notes
    except LoadError as e:
        notes = [str(e)]
    assert any(re.search(says, n) for n in notes), notes


def test_a_damaged_profiler_trace_with_allow_partial_skips_the_impossible_event(tmp_path):
    p = kineto(tmp_path, "kernel_in_1970", _kernel_in_1970)
    with pytest.warns(UserWarning, match="implausible time"):
        trace = load_any(p, strict=False)
    assert len(trace.device_spans) == 4                  # the 1970 kernel left out; the other four
    spread = max(d.t1 for d in trace.device_spans) - min(d.t0 for d in trace.device_spans)
    assert spread < 1e9


def ours(tmp_path: Path, name: str, change) -> Path:
    trace = pipelined_trace(tokens=20)
    change(trace)
    return write_trace(trace, tmp_path / f"{name}.trace.jsonl")


def _our_kernel_decades_off(tr):
    d = tr.device_spans[5]                               # the simulated clock starts near 0: 54 years on
    off = int(54 * US_PER_YEAR * 1000)
    tr.device_spans[5] = d._replace(t0=d.t0 + off, t1=d.t1 + off, enqueued=d.enqueued + off)


def _our_past_int64(tr):
    d = tr.device_spans[5]
    tr.device_spans[5] = d._replace(t0=2**63 + 10, t1=2**63 + 20)


def _our_swapped(tr):
    h = tr.host_spans[3]
    tr.host_spans[3] = h._replace(t0=h.t1 - h.t0, t1=h.t1 - h.t0 + int(53 * US_PER_YEAR * 1000))


def _our_unknown_step(tr):
    d = tr.device_spans[7]
    tr.device_spans[7] = d._replace(step=999_999)


OURS = [("kernel_decades_off", _our_kernel_decades_off, r"device_spans record 5 \(device op .*starts 5\d\.\d years after"),
        ("past_2_63", _our_past_int64, r"device_spans record 5 .*outside \[0, 2\*\*63\) ns"),
        ("swapped", _our_swapped, r"host_spans record 3 \(host span .*years"),
        ("unknown_step", _our_unknown_step, r"device_spans record 7 .*names step 999999, which has no step record")]


@pytest.mark.parametrize("name,change,says", OURS, ids=[o[0] for o in OURS])
def test_impossible_times_in_our_traces_are_bad_input_naming_the_record(tmp_path, capsys, name, change, says):
    p = ours(tmp_path, name, change)
    with pytest.raises(TraceFormatError, match=says):
        load_trace(p)
    assert cli(["check", str(p)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "BAD INPUT" in err and "Python int too large" not in err and "Traceback" not in err
    with pytest.raises(LoadError, match=says):
        TraceStore([tmp_path]).get(p)
    trace = pipelined_trace(tokens=20)                   # a trace held in memory: the gate checks it too
    change(trace)
    assert run_check(trace).exit_code == EXIT_BAD_INPUT


def test_real_traces_are_plausible_and_the_rule_is_written_down():
    for p in sorted((ROOT / "tests" / "data").rglob("*.trace.jsonl")) + sorted((ROOT / "traces").glob("*.trace.jsonl")):
        load_trace(p)
    load_any(SYNC)
    docs = (ROOT / "docs" / "traces.md").read_text()
    assert "2**63" in docs and "7 days" in docs and "step record" in docs
