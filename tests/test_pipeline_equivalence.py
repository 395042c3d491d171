"""Pipelined output equals blocking output, token for token, over random workloads.

The property runs its 200 workloads against the device program in process
(``helpers/inprocess_device.py``: the worker's own ops, no worker process) and 25 more on
the real host-process worker, whose ring, shared memory and overlap with the host the
double cannot show, each also checked against the double's tokens; the fixed cases
below run on the real worker.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from photon_trace.engine.params import SamplingParams
from helpers.engine_helpers import Req, drive
from helpers.inprocess_device import in_process_engine
from helpers.request_strategies import VOCAB, assert_same_outputs, requests

PROPERTY = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture
def engines(tiny_engines):
    """The session's real tiny engines (conftest), blocking and pipelined."""
    return tiny_engines[1], tiny_engines[2]


@pytest.fixture(scope="module")
def in_process():
    blocking, pipelined = in_process_engine(1), in_process_engine(2)
    yield blocking, pipelined
    blocking.close()
    pipelined.close()


def pipelined_equals_blocking(engines, reqs):
    blocking, pipelined = engines
    a = drive(blocking, reqs)
    b = drive(pipelined, reqs)
    assert_same_outputs(a, b, reqs, "pipelined vs blocking")
    assert a.zombie_rows == 0, "blocking mode never launches a step for a stopped sequence"
    return b


@settings(max_examples=200, **PROPERTY)
@given(reqs=requests())
def test_pipelined_equals_blocking(in_process, reqs):
    pipelined_equals_blocking(in_process, reqs)


@settings(max_examples=25, **PROPERTY)
@given(reqs=requests())
def test_pipelined_equals_blocking_on_the_worker(engines, in_process, reqs):
    """Also: the in-process device draws what the worker draws (the property above relies on it)."""
    worker = pipelined_equals_blocking(engines, reqs)
    assert_same_outputs(worker, drive(in_process[1], reqs), reqs, "worker vs in-process device")


def test_single_token_finishers_make_one_zombie_row_each(engines):
    """S sequences that stop at their first token: pipelined launched each one's
    decode before committing its prefill, so exactly S zombie rows; blocking none."""
    blocking, pipelined = engines
    S = 5
    stop_everything = SamplingParams(max_tokens=8, stop_token_ids=tuple(range(VOCAB)), ignore_eos=True)
    reqs = [Req(0, [1 + i, 2, 3], stop_everything) for i in range(S)]
    a = drive(blocking, reqs)
    b = drive(pipelined, reqs)
    assert all(len(t) == 1 for t in a.tokens.values()) and a.tokens == b.tokens
    assert a.zombie_rows == 0
    assert b.zombie_rows == S


def test_seeded_request_is_batch_independent(engines):
    _, pipelined = engines
    p = SamplingParams(temperature=1.0, seed=1234, max_tokens=10, ignore_eos=True)
    alone = drive(pipelined, [Req(0, [5, 6, 7], p)]).tokens[0]
    crowd = [Req(0, [9, 9, 9 + i], SamplingParams(temperature=1.0, seed=i, max_tokens=10)) for i in range(6)]
    crowded = drive(pipelined, [Req(1, [5, 6, 7], p)] + crowd).tokens[0]
    assert alone == crowded


def test_long_prompt_prefills_in_chunks_and_matches(engines):
    blocking, pipelined = engines
    prompt = [(i * 37) % 256 for i in range(200)]   # > max_step_tokens (64): several chunks
    reqs = [Req(0, prompt, SamplingParams(max_tokens=6, ignore_eos=True)),
            Req(1, [1, 2, 3], SamplingParams(max_tokens=12, ignore_eos=True))]
    assert drive(blocking, reqs).tokens == drive(pipelined, reqs).tokens
