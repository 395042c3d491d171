"""Pipelined output equals blocking output, token for token, over random workloads."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from photon_trace.engine.params import SamplingParams
from helpers.engine_helpers import Req, drive, logprob_gap, tiny_engine

VOCAB = 2560


@pytest.fixture(scope="module")
def engines():
    blocking, pipelined = tiny_engine(1), tiny_engine(2)
    yield blocking, pipelined
    blocking.close()
    pipelined.close()


@st.composite
def requests(draw):
    n = draw(st.integers(1, 6))
    out = []
    for _ in range(n):
        greedy = draw(st.booleans())
        params = SamplingParams(
            temperature=0.0 if greedy else draw(st.sampled_from([0.5, 1.0, 1.5])),
            top_k=draw(st.sampled_from([0, 0, 5, 50])),
            top_p=draw(st.sampled_from([1.0, 1.0, 0.9, 0.5])),
            seed=draw(st.integers(0, 2**31)),
            max_tokens=draw(st.integers(1, 12)),
            # a random tenth of the vocabulary stops a request: early, unpredictable finishes
            stop_token_ids=tuple(draw(st.lists(st.integers(0, VOCAB - 1), max_size=256)))
            if draw(st.booleans()) else (),
            ignore_eos=True,
            # penalties read token counts the device keeps; logprobs come back with the tokens
            presence_penalty=draw(st.sampled_from([0.0, 0.0, 1.5, -1.0])),
            frequency_penalty=draw(st.sampled_from([0.0, 0.0, 0.7, 2.0])),
            logprobs=draw(st.sampled_from([None, None, 0, 3, 20])),
        )
        prompt = draw(st.lists(st.integers(0, 255), min_size=1, max_size=90))
        arrival = draw(st.integers(0, 8))
        abort_at = draw(st.one_of(st.none(), st.integers(arrival, arrival + 8)))
        out.append(Req(arrival, prompt, params, abort_at))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(reqs=requests())
def test_pipelined_equals_blocking(engines, reqs):
    blocking, pipelined = engines
    a = drive(blocking, reqs)
    b = drive(pipelined, reqs)
    for i, r in enumerate(reqs):
        if r.abort_at is None:
            assert a.tokens[i] == b.tokens[i], f"request {i} differs"
            assert a.reasons[i] == b.reasons[i]
            assert logprob_gap(a.outputs[i].logprobs, b.outputs[i].logprobs) < 1e-5, f"request {i}'s logprobs"
            if r.params.logprobs is not None:
                lps = a.outputs[i].logprobs
                assert [lp.token_id for lp in lps] == a.tokens[i]
                assert all(len(lp.top) == r.params.logprobs for lp in lps)
        else:
            # an abort lands at a tick, and the modes commit at different ticks:
            # both outputs are prefixes of the same continuation
            short, long = sorted((a.tokens[i], b.tokens[i]), key=len)
            assert long[:len(short)] == short, f"aborted request {i} diverged"
    assert a.zombie_rows == 0, "blocking mode never launches a step for a stopped sequence"


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
