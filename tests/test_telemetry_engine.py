"""A traced run of the real engine (tiny model, host-process device) on a mixed workload:
every committed step has all of its phases and device ops, nested and ordered."""
from __future__ import annotations

import dataclasses
import warnings
from collections import defaultdict
from contextlib import nullcontext

import pytest

from helpers.engine_helpers import Req, drive, mask_upload_sync, settle
from photon_trace.engine.constraints import ResponseFormat
from photon_trace.engine.params import SamplingParams
from photon_trace.telemetry.recording.file_writer import TraceFileWriter
from photon_trace.telemetry.recording.recorder import RecordingTracer
from photon_trace.telemetry.trace.file import load_trace
from photon_trace.telemetry.tracer import TraceLevel
from photon_trace.traced_run import attached
from helpers.trace_checks import trace_problems

FORMATS = [None, ResponseFormat("point", max_count=2), None, ResponseFormat("json_object"), None,
           ResponseFormat("detect", max_count=1), None]


def mixed_workload() -> list[Req]:
    """Staggered arrivals (so prefill mixes with decode), plain and constrained rows, one abort."""
    reqs = []
    for i, fmt in enumerate(FORMATS):
        prompt = [(5 * i + j) % 200 + 1 for j in range(6 + 5 * i)]
        params = SamplingParams(max_tokens=5 + i, ignore_eos=fmt is None, temperature=0.0 if i % 2 else 0.8,
                                seed=i)
        reqs.append(Req(2 * i, prompt, params, abort_at=9 if i == 6 else None, response_format=fmt))
    return reqs


@pytest.fixture(scope="module", params=[(2, "async"), (1, "sync")], ids=["pipelined", "blocking-syncmask"])
def traced(request, tmp_path_factory, shared_tiny_engines):
    """One traced run of the mixed workload on the session's engine of that depth (conftest),
    the tracer attached for the run."""
    depth, mask_upload = request.param
    path = tmp_path_factory.mktemp("engine") / "run.trace.jsonl"
    tracer = RecordingTracer(TraceLevel.FULL, sinks=[TraceFileWriter(path)], keep=True, flush_interval_s=0.05)
    engine = shared_tiny_engines[depth]
    with warnings.catch_warnings(), (mask_upload_sync(engine) if mask_upload == "sync" else nullcontext()):
        warnings.simplefilter("ignore", UserWarning)
        with attached(engine, tracer):
            tracer.describe(settings=dataclasses.asdict(engine.config), model=engine.config.model,
                            backend=engine.device.backend, device={"name": engine.device.device_name})
            run = drive(engine, mixed_workload())
        tracer.close()      # final flush, file end line
    assert settle(engine) is None
    return depth, mask_upload, run, tracer.snapshot(), path


def test_every_step_is_complete_nested_and_ordered(traced):
    depth, mask_upload, run, trace, _ = traced
    assert trace_problems(trace) == []
    assert len(trace.steps) == run.steps > 10
    assert [s.step for s in trace.steps] == sorted(s.step for s in trace.steps)
    assert {s.kind for s in trace.steps} >= {"prefill", "decode", "mixed"}
    assert any(s.constrained_rows for s in trace.steps) and any(not s.constrained_rows for s in trace.steps)
    host = defaultdict(set)
    for h in trace.host_spans:
        host[h.step].add(h.phase)
    dev = defaultdict(list)
    for d in trace.device_spans:
        dev[d.step].append(d)
    for s in trace.steps:
        phases = {"plan", "launch", "stage", "commit", "stream_out"}
        if s.constrained_rows:
            phases |= {"finalize", "mask_build", "mask_upload"}
        assert host[s.step] == phases, s
        ops = {d.op for d in dev[s.step]}
        assert ops & {"forward", "prefill"} and "copy_back" in ops
        assert ("masked_sample" in ops and "mask_upload" in ops) == bool(s.constrained_rows)
        by_op = {d.op: d for d in dev[s.step]}
        sampled = max(d.t1 for d in dev[s.step] if d.op in ("sample", "masked_sample"))
        assert by_op["copy_back"].t0 >= sampled
        commit = next(h for h in trace.host_spans if h.step == s.step and h.phase == "commit")
        assert commit.t1 >= by_op["copy_back"].t1


def test_waits_are_classified_with_call_sites(traced):
    depth, mask_upload, run, trace, _ = traced
    reasons = defaultdict(set)
    for w in trace.waits:
        reasons[w.expected].add(w.reason)
        assert w.t1 >= w.t0 and ":" in w.site and not w.site.startswith("engine/device/")
    assert reasons[True]
    assert bool(reasons[False]) == (mask_upload == "sync")


def test_request_lifecycles_are_recorded(traced):
    depth, mask_upload, run, trace, _ = traced
    events = defaultdict(list)
    for r in trace.requests:
        events[r.req_id].append(r.event)
    assert len(events) == len(FORMATS)
    for evs in events.values():
        assert evs[:2] == ["arrival", "admitted"] and evs[-1] == "freed"
        assert ("finalized" in evs) != ("aborted" in evs)
    assert sum("aborted" in e for e in events.values()) <= 1


def test_the_file_written_while_running_loads_back_equal(traced):
    depth, mask_upload, run, trace, path = traced
    back = load_trace(path)
    assert back == trace
    assert back.header["backend"] == "cpu" and back.header["settings"]["depth"] == depth
    assert back.header["trace_level"] == "full"
