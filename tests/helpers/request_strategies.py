"""Hypothesis strategies for engine workloads, shared by the equivalence tests."""
from __future__ import annotations

from hypothesis import strategies as st

from photon_trace.engine.params import SamplingParams
from helpers.engine_helpers import Req, logprob_gap

VOCAB = 2560   # the tiny preset's vocabulary


@st.composite
def requests(draw):
    """1-6 requests: greedy or sampled (top-k, top-p, min-p, seeds, penalties), logprobs, random stop
    tokens, arrivals, aborts."""
    n = draw(st.integers(1, 6))
    out = []
    for _ in range(n):
        greedy = draw(st.booleans())
        params = SamplingParams(
            temperature=0.0 if greedy else draw(st.sampled_from([0.5, 1.0, 1.5])),
            top_k=draw(st.sampled_from([0, 0, 5, 50])),
            top_p=draw(st.sampled_from([1.0, 1.0, 0.9, 0.5])),
            min_p=draw(st.sampled_from([0.0, 0.0, 0.05, 0.3])),
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


def assert_same_outputs(a, b, reqs, what: str, logprob_tol: float = 1e-5) -> None:
    """Equal tokens and finish reasons, logprobs within ``logprob_tol`` (with as many
    alternatives as asked); an aborted request's outputs are prefixes of one continuation
    (an abort lands at a tick, and the modes commit at different ticks)."""
    for i, r in enumerate(reqs):
        if r.abort_at is None:
            assert a.tokens[i] == b.tokens[i], f"{what}: request {i} differs"
            assert a.reasons[i] == b.reasons[i], f"{what}: request {i} finished differently"
            gap = logprob_gap(a.outputs[i].logprobs, b.outputs[i].logprobs)
            assert gap < logprob_tol, f"{what}: request {i}'s logprobs differ by {gap}"
            if r.params.logprobs is not None:
                lps = a.outputs[i].logprobs
                assert [lp.token_id for lp in lps] == a.tokens[i]
                assert all(len(lp.top) == r.params.logprobs for lp in lps)
        else:
            short, long = sorted((a.tokens[i], b.tokens[i]), key=len)
            assert long[:len(short)] == short, f"{what}: aborted request {i} diverged"
