"""The device clock: the error bound a trace states, and the check of our device spans
against CUPTI's records of the same run (what ``scripts/cupti_clock_check.py`` runs on a GPU).

The CUPTI side here is synthetic (built to the shape ``torch.profiler`` exports, with
a clock offset, per-kernel latencies and jitter) plus the parser run on real Kineto
traces from /work/shared/kineto-samples when present.
"""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from photon_trace.telemetry.analysis.clock import (
    Activity, clock_error_ns, compare_with_cupti, kineto_activities)
from photon_trace.telemetry.trace.records import DeviceSpan, Trace

US = 1000
OFFSET = 1_700_000_000_000_000_000 - 5_000_000_000   # Kineto's unix ns against our monotonic ns
COMPUTE, COPY = 7, 13


def test_the_error_bound_is_the_anchor_until_a_drift_is_measured():
    assert clock_error_ns({}) == 0
    assert clock_error_ns({"clock": {"device_error_ns": 3000}}) == 3000
    assert clock_error_ns({"clock": {"device_error_ns": 3000, "drift_ns": -4000, "drift_error_ns": 6500}}) == 10500
    assert clock_error_ns({"clock": {"device_error_ns": 9000, "drift_ns": 0, "drift_error_ns": 1}}) == 9000


def _run(steps=40, gap_every=5, seed=0):
    """Our spans and CUPTI's activities of one pipelined run: stage copy, forward
    kernels, sample kernels; every ``gap_every``-th step the device waits 60 us."""
    rng = random.Random(seed)
    spans, acts = [], []
    t = 1_000_000
    for step in range(steps):
        stage = (t, t + 6 * US)
        fwd = (stage[1], stage[1] + 3000 * US)
        smp = (fwd[1], fwd[1] + 120 * US)
        spans += [DeviceSpan("compute", "stage", step, step % 2, *stage, stage[0]),
                  DeviceSpan("compute", "forward", step, step % 2, *fwd, fwd[0]),
                  DeviceSpan("compute", "sample", step, step % 2, *smp, smp[0]),
                  DeviceSpan("copy", "copy_back", step, step % 2, smp[1] + 2 * US, smp[1] + 5 * US, smp[0])]

        def j():
            return rng.randint(-1500, 1500)   # CUPTI against events: per-record jitter
        acts.append(Activity(OFFSET + stage[0] + 2 * US + j(), OFFSET + stage[1] - 1 * US + j(), COMPUTE, "gpu_memcpy"))
        k0 = fwd[0] + 4 * US   # begin event -> first kernel of the graph
        for n in range(10):
            a, b = k0 + n * 299 * US, k0 + (n + 1) * 299 * US - 1 * US
            acts.append(Activity(OFFSET + a + (j() if n == 0 else 0), OFFSET + b + (j() if n == 9 else 0), COMPUTE, "kernel"))
        acts.append(Activity(OFFSET + smp[0] + 3 * US, OFFSET + smp[1] - 2 * US, COMPUTE, "kernel"))
        acts.append(Activity(OFFSET + smp[1] + 3 * US, OFFSET + smp[1] + 4 * US, COPY, "gpu_memcpy"))
        t = smp[1] + (60 * US if step % gap_every == gap_every - 1 else 0)
    return Trace(header={}, device_spans=spans), sorted(acts)


def test_agreeing_clocks_agree_within_the_tolerance():
    trace, acts = _run()
    res = compare_with_cupti(trace, acts, realtime_minus_monotonic_ns=OFFSET)
    assert res.ok, res.lines()
    assert res.forwards == 40 and res.worst_ns <= 2 * US
    assert abs(res.offset_ns - OFFSET - 4 * US) <= 2 * US        # the begin-event latency is in the offset
    assert res.our_bubbles == res.cupti_bubbles == 7              # a 60 us wait after every 5th step but the last
    assert res.hidden_bubbles == 0
    assert "AGREE" in res.lines()[0]


def test_a_forward_end_our_events_misplace_is_found():
    trace, acts = _run()
    spans = list(trace.device_spans)
    i = next(k for k, d in enumerate(spans) if d.op == "forward" and d.step == 11)
    spans[i] = spans[i]._replace(t1=spans[i].t1 + 25 * US)
    res = compare_with_cupti(Trace(header={}, device_spans=spans), acts)
    assert not res.ok and res.worst_ns >= 20 * US


def test_idle_inside_one_of_our_spans_is_a_bubble_only_cupti_sees():
    """Kernels launched slower than they run (eager sampling) leave the device idle inside
    what our two events call one busy op."""
    trace, acts = _run()
    step_sample = [a for a in acts if a.kind == "kernel" and a.t1 - a.t0 > 100 * US and a.t1 - a.t0 < 200 * US][3]
    mid = (step_sample.t0 + step_sample.t1) // 2
    holed = [a for a in acts if a != step_sample] + [
        Activity(step_sample.t0, mid - 20 * US, COMPUTE, "kernel"), Activity(mid + 20 * US, step_sample.t1, COMPUTE, "kernel")]
    res = compare_with_cupti(trace, sorted(holed))
    assert res.hidden_bubbles == 1 and res.hidden_ns == pytest.approx(40 * US, abs=2)
    assert res.cupti_bubbles == res.cupti_bubbles_matched + 1
    assert res.ok, "idle inside a span is counted apart: it is no clock error"
    assert "1 CUPTI gaps inside our spans, 40.0 us" in res.lines()[3]


def test_a_begin_event_enqueued_on_an_idle_stream_is_edge_idle_not_a_clock_error():
    """A host late to launch: the begin event fires when recorded, the forward's first kernel
    only when launched 300 us later. The event lies inside the idle CUPTI shows, so the clocks
    agree; the 300 us are idle our span calls busy. The same event 40 us early, before the work ahead
    of it ended cannot be: the stream runs in order."""
    trace, acts = _run()
    late = 300 * US
    shifted = [a._replace(t0=a.t0 + late, t1=a.t1 + late) if a.t0 >= _forward(trace, 20).t0 + OFFSET else a
               for a in acts]
    spans = [d if d.t0 < _forward(trace, 20).t0 else d._replace(t0=d.t0 + late, t1=d.t1 + late)
             for d in trace.device_spans]
    spans = [d._replace(t0=d.t0 - late) if d.op == "forward" and d.step == 20 else d for d in spans]
    res = compare_with_cupti(Trace(header={}, device_spans=spans), sorted(shifted))
    assert res.ok, res.lines()
    assert res.edge_idle == 1 and res.edge_idle_ns == pytest.approx(late, abs=5 * US)
    early = [d._replace(t0=d.t0 - 40 * US) if d.op == "forward" and d.step == 31 else d for d in trace.device_spans]
    res = compare_with_cupti(Trace(header={}, device_spans=early), acts)
    assert not res.ok and res.worst_ns >= 20 * US


def _forward(trace, step):
    return next(d for d in trace.device_spans if d.op == "forward" and d.step == step)


def test_nothing_to_compare_is_said_plainly():
    trace, _ = _run(steps=2)
    res = compare_with_cupti(trace, [])
    assert not res.ok and res.skipped and res.lines() == [f"clock check skipped: {res.skipped}"]


def test_kineto_chrome_traces_parse_with_and_without_a_base_time():
    events = [{"ph": "X", "cat": "kernel", "ts": 5.5, "dur": 2.25, "args": {"stream": 7}},
              {"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 9, "args": {}},
              {"ph": "X", "cat": "gpu_memcpy", "ts": 1.0, "dur": 1.0, "args": {"stream": 9}}]
    acts = kineto_activities({"baseTimeNanoseconds": 10**18, "traceEvents": events})
    assert acts == [Activity(10**18 + 1000, 10**18 + 2000, 9, "gpu_memcpy"),
                    Activity(10**18 + 5500, 10**18 + 7750, 7, "kernel")]
    assert kineto_activities({"traceEvents": events})[0].t0 == 1000


SAMPLE = Path("/work/shared/kineto-samples/critical_path_cuda_event_sync_event_sync_trace.json.gz")


@pytest.mark.skipif(not SAMPLE.exists(), reason="the Kineto samples are not on this machine")
def test_a_real_kineto_trace_gives_its_kernels_and_copies():
    chrome = json.loads(gzip.open(SAMPLE).read())
    acts = kineto_activities(chrome)
    assert [a.kind for a in acts].count("kernel") == 4 and [a.kind for a in acts].count("gpu_memcpy") == 1
    assert all(a.t1 >= a.t0 > 1.7e18 for a in acts)   # unix ns (2024)
