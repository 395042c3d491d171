"""Perfetto/Chrome export: valid trace-event JSON with the expected tracks, slices and flows."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from photon_trace.cli import main as cli
from photon_trace.telemetry.export.perfetto import DEVICE_PID, HOST_PID, write_chrome_trace
from helpers.code_sites import MASK_SYNC_SITE
from helpers.loop_sim import SyntheticRun, synthetic_trace
from photon_trace.telemetry.trace.file import write_trace

PHASES = {"M", "X", "s", "f", "b", "e", "n", "i"}


@pytest.fixture(scope="module")
def trace():
    return synthetic_trace(SyntheticRun(steps=24, mask_upload_bug=True))


@pytest.fixture(scope="module")
def doc(trace, tmp_path_factory):
    path = write_chrome_trace(trace, tmp_path_factory.mktemp("pf") / "t.json")
    return json.loads(path.read_text())  # valid JSON


def test_every_event_has_the_fields_its_phase_needs(doc):
    assert isinstance(doc["traceEvents"], list) and doc["displayTimeUnit"] == "ns"
    for e in doc["traceEvents"]:
        assert e["ph"] in PHASES and isinstance(e["pid"], int) and isinstance(e["name"], str)
        if e["ph"] == "X":
            assert isinstance(e["tid"], int) and e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["args"], dict)
        if e["ph"] in "sf":
            assert "id" in e and "ts" in e and "tid" in e
        if e["ph"] in "ben":
            assert e["cat"] == "request" and "id" in e


def test_a_process_for_host_and_device_and_a_track_per_thread_and_stream(doc):
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert procs[HOST_PID].startswith("host") and procs[DEVICE_PID].startswith("device virtual device")
    threads = {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "thread_name"}
    assert {(HOST_PID, "scheduler"), (HOST_PID, "requests"),
            (DEVICE_PID, "compute stream"), (DEVICE_PID, "copy stream")} <= threads


def test_slices_match_the_records_in_microseconds(doc, trace):
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    origin = doc["otherData"]["mono_origin_ns"]
    host = [e for e in xs if e["pid"] == HOST_PID and e["cat"] in ("phase", "subphase")]
    dev = [e for e in xs if e["pid"] == DEVICE_PID and e["cat"] == "device_op"]
    waits = [e for e in xs if e["cat"] == "host_wait"]
    assert len(host) == len(trace.host_spans) and len(dev) == len(trace.device_spans)
    assert len(waits) == len(trace.waits)
    d0 = trace.device_spans[0]
    match = [e for e in dev if e["name"] == d0.op and e["args"]["step"] == d0.step]
    assert match[0]["ts"] == pytest.approx((d0.t0 - origin) / 1000, abs=1e-3)
    assert match[0]["dur"] == pytest.approx((d0.t1 - d0.t0) / 1000, abs=2e-3)
    assert {"rows", "kind", "slot", "zombie_rows", "constrained_rows"} <= set(match[0]["args"])
    bad = [w for w in waits if not w["args"]["expected"]]
    assert bad and all(w["args"]["site"] == MASK_SYNC_SITE for w in bad)


def test_slices_on_each_track_nest_without_partial_overlap(doc):
    tracks = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)
    for key, evs in tracks.items():
        stack = []
        for e in evs:  # the exporter's order: by start, parents first
            end = round(e["ts"] + e["dur"], 3)
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, f"partial overlap on track {key}: {e}"
            stack.append(end)


def test_a_flow_from_the_issuing_host_slice_to_each_device_op(doc, trace):
    evs = doc["traceEvents"]
    starts = {e["id"]: e for e in evs if e["ph"] == "s"}
    finishes = {e["id"]: e for e in evs if e["ph"] == "f"}
    assert set(starts) == set(finishes) and len(starts) == len(trace.device_spans)
    tracks = defaultdict(list)
    for e in evs:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)

    def enclosing(ev):
        return [x for x in tracks[(ev["pid"], ev["tid"])] if x["ts"] <= ev["ts"] <= x["ts"] + x["dur"] + 1e-3]

    names = defaultdict(set)
    for fid, s in starts.items():
        f = finishes[fid]
        assert s["pid"] == HOST_PID and f["pid"] == DEVICE_PID and f["bp"] == "e"
        host = enclosing(s)
        dev = enclosing(f)
        assert host and len(dev) == 1
        assert dev[0]["args"]["step"] in {h["args"]["step"] for h in host}
        names[dev[0]["name"]] |= {h["name"] for h in host}
    assert "launch" in names["forward"] and "finalize" in names["copy_back"]
    assert "mask_upload" in names["mask_upload"]


def test_requests_are_async_slices(doc, trace):
    begins = [e for e in doc["traceEvents"] if e["ph"] == "b"]
    ends = [e for e in doc["traceEvents"] if e["ph"] == "e"]
    finished = {r.req_id for r in trace.requests if r.event == "finalized"}
    assert {e["id"] for e in begins} == {e["id"] for e in ends} == finished


def test_command_line_converts_a_trace_file(tmp_path, trace, capsys):
    """``photon-trace export perfetto TRACE [OUT]``: OUT defaults to beside TRACE; not a trace: exit 2."""
    src = write_trace(trace, tmp_path / "run.trace.jsonl")
    assert cli(["export", "perfetto", str(src)]) == 0
    out = tmp_path / "run.perfetto.json"
    assert json.loads(out.read_text())["traceEvents"]
    assert capsys.readouterr().out.strip() == str(out)
    (tmp_path / "junk.txt").write_text("hello\n")
    assert cli(["export", "perfetto", str(tmp_path / "junk.txt")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'junk.txt'}: not a photon_trace trace")
    with pytest.raises(SystemExit) as usage:    # no TRACE: argparse's usage line, exit 2
        cli(["export", "perfetto"])
    assert usage.value.code == 2


def test_bubbles_are_a_track_with_their_causes_and_syncs_are_instants_with_their_call_site(doc, trace):
    from photon_trace.telemetry.analysis import analyze
    from photon_trace.telemetry.export.perfetto import BUBBLES_TRACK
    evs = doc["traceEvents"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    bubbles = [e for e in evs if e.get("cat") == "bubble"]
    assert bubbles and {tracks[(e["pid"], e["tid"])] for e in bubbles} == {BUBBLES_TRACK}
    rep = analyze(trace)
    counted = [e for e in bubbles if e["args"]["counted_in_analysis_window"]]
    assert sum(e["args"]["idle_us"] for e in counted) == pytest.approx(rep.bubble_ns / 1e3, rel=0.02)
    assert {e["name"] for e in bubbles} <= {"bubble: accidental sync", "bubble: host-bound launch",
                                            "bubble: device dispatch", "bubble: copy wait", "bubble: expected commit wait"}
    assert all(e["args"]["who_can_fix_it"] in ("host code", "device-side latency") for e in bubbles)
    syncs = [e for e in evs if e["ph"] == "i"]
    assert len(syncs) == sum(1 for w in trace.waits if not w.expected)
    assert all(e["s"] == "t" and e["name"] == f"accidental sync: {e['args']['site']}" for e in syncs)
    inside = [e for e in syncs if e["args"]["device_idle_caused_us"] > 0]
    assert inside and sum(e["args"]["device_idle_caused_us"] for e in syncs) >= sum(
        s.idle_ns for s in rep.syncs) / 1e3 * 0.98


def test_the_file_is_streamed_and_gzip_works(tmp_path, trace):
    import gzip
    plain = write_chrome_trace(trace, tmp_path / "a.json", buffer_events=7)
    packed = write_chrome_trace(trace, tmp_path / "a.json.gz")
    assert json.loads(plain.read_text()) == json.loads(gzip.decompress(packed.read_bytes()))


def test_a_span_and_a_wait_say_whether_the_host_ran(tmp_path):
    """Issue 28 item 1: the thread's on-CPU and run-queue time ride on the slices, where recorded."""
    from helpers.trace_builder import COMMIT_SITE, US, TraceBuilder
    b = TraceBuilder()
    b.compute("forward", 1, 0, 100 * US).copy("copy_back", 1, 100 * US, 110 * US)
    b.host("commit", 1, 50 * US, 400 * US, cpu_ns=120 * US, runq_ns=200 * US).host("plan", 2, 400 * US, 410 * US)
    b.wait("commit: copy-back", 60 * US, 390 * US, expected=True, site=COMMIT_SITE, step=1, cpu_ns=100 * US,
           runq_ns=200 * US)
    out = write_chrome_trace(b.build(), tmp_path / "ran.json")
    events = json.loads(out.read_text())["traceEvents"]
    commit = next(e for e in events if e.get("name") == "commit")
    wait = next(e for e in events if e.get("cat") == "host_wait")
    plan = next(e for e in events if e.get("name") == "plan")
    assert (commit["args"]["on_cpu_us"], commit["args"]["runq_us"]) == (120.0, 200.0)
    assert (wait["args"]["on_cpu_us"], wait["args"]["runq_us"]) == (100.0, 200.0)
    assert "on_cpu_us" not in plan["args"]        # not recorded: not said
