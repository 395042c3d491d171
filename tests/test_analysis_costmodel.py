"""The cost model's arithmetic, and its prediction against modelled runs."""
from __future__ import annotations

import random

import pytest

from photon_trace.telemetry.analysis import analyze, cost_model
from helpers.trace_builder import blocking_trace, pipelined_trace


def pair(**kw):
    return analyze(blocking_trace(**kw)), analyze(pipelined_trace(**kw))


def test_predicted_is_the_period_ratio_less_the_zombie_tax():
    blk, pipe = pair(tokens=50)
    c = cost_model(blk, pipe)
    assert (c.T_block, c.T_pipe, c.L, c.z) == (blk.run_period_ms, pipe.run_period_ms, 50.0, pipe.z)
    assert c.predicted == pytest.approx(blk.run_period_ms / pipe.run_period_ms * (1 - pipe.z))
    assert c.observed == pytest.approx(pipe.e2e_tokens_per_s / blk.e2e_tokens_per_s)
    assert c.observed_steady == pytest.approx(pipe.tokens_per_s / blk.tokens_per_s)
    assert c.error_pts == pytest.approx((c.predicted - c.observed) * 100)


def test_options_pick_the_steady_or_median_period_and_the_wasted_step_tax():
    blk, pipe = pair(tokens=50)
    c = cost_model(blk, pipe, period="median", tax="steps")
    assert (c.T_block, c.T_pipe, c.z) == (blk.period_ms, pipe.period_ms, pipe.z_steps)
    c = cost_model(blk, pipe, period="steady")
    assert (c.T_block, c.T_pipe) == (blk.mean_period_ms, pipe.mean_period_ms)
    with pytest.raises(ValueError):
        cost_model(blk, pipe, period="mode")


rng = random.Random(7)


# Short ragged requests end in a long tail of under-full steps as the queue runs dry; a zombie
# row there displaces no work, so the tax z overcharges and the observed speedup lands above
# the prediction: by 0.8 (4x4) and 1.4 (8x3-fast) points with the scheduler's one queue (0.99
# and 0.79 with the per-stream queues simulated before). There the bound is the issue's
# 2 points; elsewhere 1.
@pytest.mark.parametrize("kw, points", [
    (dict(tokens=110), 1),
    (dict(streams=8, tokens=110), 1),
    (dict(streams=8, tokens=[rng.randint(80, 140) for _ in range(8)]), 1),
    (dict(streams=8, requests_per_stream=3, tokens=[rng.randint(80, 140) for _ in range(24)]), 1),
    (dict(requests_per_stream=4, tokens=20), 1),
    (dict(streams=4, requests_per_stream=4, tokens=[rng.randint(10, 30) for _ in range(16)]), 2),
    (dict(tokens=110, forward_ns=600_000), 1),
    (dict(streams=8, requests_per_stream=3, tokens=[rng.randint(10, 30) for _ in range(24)], forward_ns=600_000), 2),
], ids=["1", "8", "8-ragged", "8x3-ragged", "1x4-short", "4x4-short-ragged", "1-fast", "8x3-fast-short-ragged"])
def test_prediction_lands_within_two_points_of_the_observed_speedup(kw, points):
    c = cost_model(*pair(**kw))
    assert c.predicted > 1.1
    assert abs(c.error_pts) < points, c   # the issue asks 2 points of the real engine
