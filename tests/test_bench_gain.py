"""The bench's pipelining gain with its interval, and its warning when the modes' device times
differ (issue 28 item 4), on simulated blocking and pipelined runs of one workload."""
from __future__ import annotations

from dataclasses import replace

from helpers.loop_sim import BATCHED_COSTS, SyntheticRun, synthetic_trace
from photon_trace.cli.bench_gain import gain_of, render_gains
from photon_trace.telemetry.analysis import analyze

RUN = dict(steps=None, streams=4, requests=8, output_tokens=(60,), arrival_gap_ns=0, constrained_every=0, jitter=0.1)


def reports(pipelined_forward_scale: float = 1.0) -> dict[str, list]:
    slow = replace(BATCHED_COSTS, forward_ns=int(pipelined_forward_scale * BATCHED_COSTS.forward_ns))
    return {"blocking": [analyze(synthetic_trace(SyntheticRun(depth=1, seed=s, **RUN))) for s in (1, 2)],
            "pipelined": [analyze(synthetic_trace(SyntheticRun(depth=2, seed=s, costs=slow, **RUN))) for s in (3, 4)]}


NO_HOST = {"blocking": [{}, {}], "pipelined": [{}, {}]}


def test_the_gain_has_an_interval_and_no_warning_when_the_device_held():
    g = gain_of(reports(), NO_HOST)
    assert g["valid"] and g["gain_low"] <= g["gain"] <= g["gain_high"] and g["gain_low"] > 1.0
    lines = render_gains([{"streams": 4, "gain": g}])
    assert any(f"gain {g['gain']:.3f}x (95% interval" in line for line in lines)
    assert not any(line.startswith("warning") for line in lines)


def test_the_bench_warns_when_the_modes_device_times_differ():
    g = gain_of(reports(pipelined_forward_scale=1.5), NO_HOST)
    assert not g["valid"] and g["device"]["forward"]["ratio"] > 1.4
    (warning,) = [line for line in render_gains([{"streams": 4, "gain": g}]) if line.startswith("warning")]
    assert warning.startswith("warning: 4 streams: the machine changed: forward")
