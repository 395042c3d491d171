"""Engine behaviour beyond equivalence: bad input, dead devices, waiting for pages, streaming."""
from __future__ import annotations

import os
import signal
import time

import pytest

from photon_trace.engine.device import DeviceError
from photon_trace.engine.params import SamplingParams
from helpers.engine_helpers import Req, drive, tiny_engine
from helpers.inprocess_device import in_process_engine


@pytest.fixture
def engine(tiny_engines):
    """The session's pipelined tiny engine (conftest)."""
    return tiny_engines[2]


def test_bad_requests_are_rejected_and_the_engine_keeps_serving(engine):
    with pytest.raises(ValueError, match="empty"):
        engine.add_request([], SamplingParams())
    with pytest.raises(ValueError, match="context"):
        engine.add_request(list(range(250)), SamplingParams(max_tokens=100))
    with pytest.raises(ValueError, match="token ids"):
        engine.add_request([99999], SamplingParams())
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    out = engine.generate(["ok"], SamplingParams(max_tokens=4, ignore_eos=True))
    assert len(out[0].token_ids) == 4
    engine.check_invariants()


def test_requests_wait_for_pages_instead_of_failing():
    """Pages are the scheduler's: this engine, its pool too small for six requests at once,
    runs on the in-process device."""
    # a 256-token pool of 8-token pages; each request reserves 24 + 100 tokens → two at once
    eng = in_process_engine(2, kv_tokens=256)
    try:
        reqs = [Req(0, [i % 250 + 1] * 24, SamplingParams(max_tokens=100, ignore_eos=True)) for i in range(6)]
        run = drive(eng, reqs)
        assert all(len(t) == 100 for t in run.tokens.values())
        assert eng.scheduler.allocator.all_free()
    finally:
        eng.close()


def test_stream_yields_incrementally_and_matches_generate(engine):
    p = SamplingParams(temperature=0.8, seed=7, max_tokens=9, ignore_eos=True)
    deltas = list(engine.stream("stream me", p))
    assert deltas[-1].finished and all(not d.finished for d in deltas[:-1])
    streamed = [t for d in deltas for t in d.token_ids]
    assert streamed == engine.generate(["stream me"], p)[0].token_ids


def test_stop_string_finishes_and_is_trimmed(engine):
    # find a printable ASCII character in a long continuation, then stop on it
    prompt = "abc"
    first = engine.generate([prompt], SamplingParams(max_tokens=120, ignore_eos=True))[0]
    chars = [chr(t) for t in first.token_ids if 0x21 <= t <= 0x7e]
    assert chars, "no printable byte in 120 tokens"
    stop = chars[0]
    out = engine.generate([prompt], SamplingParams(max_tokens=120, ignore_eos=True, stop=(stop,)))[0]
    assert out.finish_reason == "stop" and stop not in out.text
    assert len(out.token_ids) <= len(first.token_ids)


def test_metrics_are_recorded(engine):
    out = engine.generate(["metrics"], SamplingParams(max_tokens=5, ignore_eos=True))[0]
    m = out.metrics
    assert m.ttft_s > 0 and m.e2e_s >= m.ttft_s and m.tpot_s > 0 and m.queue_s >= 0


def test_abort_frees_everything(engine):
    rid = engine.add_request([1, 2, 3], SamplingParams(max_tokens=50, ignore_eos=True))
    for _ in range(3):
        engine.step()
    assert engine.abort(rid)
    engine.run_until_idle()
    engine.check_invariants()
    assert engine.requests.output(rid, forget=True).finish_reason == "abort"


def test_a_dead_device_is_an_error_not_a_hang():
    eng = tiny_engine(2)
    try:
        eng.add_request([1, 2, 3], SamplingParams(max_tokens=200, ignore_eos=True))
        eng.step()
        os.kill(eng.device._proc.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(DeviceError, match="died|unreachable|failed"):
            for _ in range(1000):
                eng.step()
        assert time.monotonic() - t0 < 10
    finally:
        eng.device.close()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two CPUs")
def test_the_host_gets_its_cpus_back_when_its_last_engine_closes(monkeypatch):
    monkeypatch.delenv("PHOTON_TRACE_NO_PIN", raising=False)
    before = os.sched_getaffinity(0)
    first, second = tiny_engine(2), tiny_engine(2)
    try:
        worker_cpu = os.sched_getaffinity(first.device._proc.pid)
        assert os.sched_getaffinity(0) == before - worker_cpu      # the device's core is its own
        first.close()
        assert os.sched_getaffinity(0) == before - worker_cpu      # the second engine still runs
    finally:
        second.close()
    assert os.sched_getaffinity(0) == before


def test_a_device_with_two_threads_is_not_pinned_and_serves():
    before = os.sched_getaffinity(0)
    eng = tiny_engine(2, device_threads=2)
    try:
        assert "2 intra-op threads" in eng.device.device_name
        assert os.sched_getaffinity(0) == before            # the host keeps every core
        (out,) = eng.generate([[1, 2, 3]], SamplingParams(max_tokens=8, ignore_eos=True))
        assert len(out.token_ids) == 8
    finally:
        eng.close()
    with pytest.raises(ValueError, match="device_threads"):
        tiny_engine(2, device_threads=0)
