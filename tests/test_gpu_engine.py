"""CUDA-only checks of the pipelined engine: graphs replayed, no device allocation
and no synchronisation in the steady-state decode loop, pipelined equals blocking."""
from __future__ import annotations

import pytest
import torch

from photon_trace.engine.engine import Engine
from photon_trace.engine.params import SamplingParams

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

CFG = dict(model="tiny", backend="cuda", dtype="float32", max_rows=16, max_seqs=32,
           kv_tokens=4096, max_context=512)


def _prompts(n):
    return [[(5 * i + j) % 250 + 1 for j in range(12)] for i in range(n)]


def _warm(engine: Engine, n: int) -> None:
    # run every batch bucket once so capture (a one-off sync) happens before the measured loop
    engine.generate(_prompts(n), SamplingParams(max_tokens=24, ignore_eos=True))


def test_cuda_pipelined_equals_blocking_and_graphs_replay():
    outs = {}
    for depth in (1, 2):
        with Engine(**CFG, depth=depth) as eng:
            params = [SamplingParams(max_tokens=20, ignore_eos=True, temperature=t, seed=i)
                      for i, t in enumerate([0.0, 0.7, 1.0, 0.0, 1.2, 0.0])]
            outs[depth] = [o.token_ids for o in eng.generate(_prompts(6), params)]
            assert eng.device._graphs, "no CUDA graph was captured for decode"
            eng.check_invariants()
    assert outs[1] == outs[2]


def test_cuda_min_p_draws_the_same_tokens_at_both_depths_and_min_p_one_is_greedy():
    """min-p on the CUDA path (graphed decode, the compute stream) beside top-k and top-p."""
    rows = [dict(temperature=1.5, min_p=0.3), dict(temperature=1.0, min_p=0.1, top_p=0.9),
            dict(temperature=1.2, min_p=0.2, top_k=20), dict(temperature=2.0, min_p=1.0), dict()]
    outs = {}
    for depth in (1, 2):
        with Engine(**CFG, depth=depth) as eng:
            params = [SamplingParams(max_tokens=20, ignore_eos=True, seed=i, **kw) for i, kw in enumerate(rows)]
            outs[depth] = [o.token_ids for o in eng.generate(_prompts(len(rows)), params)]
            greedy = eng.generate(_prompts(len(rows))[3:4], SamplingParams(max_tokens=20, ignore_eos=True))
            assert outs[depth][3] == greedy[0].token_ids      # min_p 1 keeps only the likeliest token
            eng.check_invariants()
    assert outs[1] == outs[2]


def test_no_device_allocation_and_no_sync_in_steady_state_decode():
    with Engine(**CFG, depth=2) as eng:
        _warm(eng, 8)
        for p in _prompts(8):
            eng.add_request(p, SamplingParams(max_tokens=40, ignore_eos=True))
        for _ in range(6):      # admission and prefill, then the first decode steps
            eng.step()
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()
        graphs_before = len(eng.device._graphs)
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(20):  # steady-state decode: every op on the device, no syncs
                eng.step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        after = torch.cuda.memory_stats()
        assert after["segment.all.allocated"] == before["segment.all.allocated"], "cudaMalloc in the loop"
        assert after["reserved_bytes.all.current"] == before["reserved_bytes.all.current"]
        assert len(eng.device._graphs) == graphs_before, "a graph was captured in the steady state"
        eng.run_until_idle()
        eng.check_invariants()


def test_no_graph_is_captured_during_a_measured_run(tmp_path):
    """The bench's warm-up (``prepare`` on the pipelined engine, ``warm_up`` on the blocking
    one) captures every (slot, batch, page) bucket its measured runs use: a capture inside
    a traced step would be a synchronize and tens of ms of device idle in the numbers."""
    from photon_trace.traced_run import trace_run
    from photon_trace.workload import Workload, engine_settings, prepare, warm_up

    wl = Workload(streams=8, tokens=24, seed=2)
    sizes = engine_settings(wl)
    with Engine(model="tiny", backend="cuda", dtype="float32", depth=2, **sizes) as pipe, \
            Engine(model="tiny", backend="cuda", dtype="float32", depth=1, **sizes) as block:
        prepared = prepare(pipe, wl)
        warm_up(block, prepared)
        for r, eng in enumerate((pipe, block, pipe, block)):
            graphs = set(eng.device._graphs)
            trace_run(eng, prepared, tmp_path / f"run{r}.trace.jsonl", analyse=False)
            assert set(eng.device._graphs) == graphs, f"captured during a measured run: {set(eng.device._graphs) - graphs}"
