"""Shared helpers for engine tests: small engines on the tiny preset, a workload driver."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from photon_trace.engine.engine import Engine
from photon_trace.engine.params import SamplingParams

TINY = dict(model="tiny", backend="cpu", max_rows=16, max_step_tokens=64, max_seqs=32,
            kv_tokens=2048, page_size=8, max_context=256)


def tiny_engine(depth: int, **overrides) -> Engine:
    return Engine(**{**TINY, "depth": depth, **overrides})


@contextmanager
def unpinned() -> Iterator[None]:
    """Engines made in the block leave CPU affinity alone (``PHOTON_TRACE_NO_PIN``). A pinned
    engine narrows the thread that made it to the other cores until it closes: one kept for
    the session would leave every later test, and every process it starts, on one core."""
    before = os.environ.get("PHOTON_TRACE_NO_PIN")
    os.environ["PHOTON_TRACE_NO_PIN"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PHOTON_TRACE_NO_PIN"]
        else:
            os.environ["PHOTON_TRACE_NO_PIN"] = before


@contextmanager
def mask_upload_sync(engine: Engine) -> Iterator[Engine]:
    """``engine`` with the mask-upload bug (``mask_upload="sync"``) for the block: the engine
    reads the setting at each finalize, so it is then the engine built with it."""
    config = engine.config
    engine.config = replace(config, mask_upload="sync")
    try:
        yield engine
    finally:
        engine.config = config


def settle(engine: Engine) -> str | None:
    """Make ``engine`` fit for the next test that shares it: commit what is in flight (a
    pipelined engine keeps a step in flight after its last request finished: that step's
    zombie rows) and run anything left to its end. Returns what is wrong with it, None when
    nothing is: it must be alive, and once idle have every page, row and slot free."""
    if engine._failed or engine._closed:
        return "its device failed or it was closed"
    try:
        engine.run_until_idle()
        engine.check_invariants()
    except Exception as e:     # noqa: BLE001 (whatever it is, the engine is not fit to share)
        return f"{type(e).__name__}: {e}"
    return None


@dataclass
class Req:
    arrival: int                  # tick at which it is added
    prompt: list[int]
    params: SamplingParams
    abort_at: int | None = None   # tick at which it is aborted (if still running)
    response_format: object = None


@dataclass
class Run:
    tokens: dict[int, list[int]] = field(default_factory=dict)
    reasons: dict[int, str | None] = field(default_factory=dict)
    outputs: dict[int, object] = field(default_factory=dict)  # RequestOutput by request index
    zombie_rows: int = 0
    steps: int = 0


def logprob_gap(a, b) -> float:
    """Largest difference between two requests' logprobs (lists of TokenLogprob or None), which
    must name the same tokens and alternatives. Depths batch differently (a zombie row changes a
    step's batch size), and a CPU matmul's last bits depend on the batch size, so values agree to
    float rounding, not bit for bit; the tokens drawn from them are identical."""
    if a is None or b is None:
        assert a is b
        return 0.0
    assert [x.token_id for x in a] == [y.token_id for y in b]
    gap = 0.0
    for x, y in zip(a, b):
        assert [t for t, _ in x.top] == [t for t, _ in y.top] or max(
            abs(u - v) for (_, u), (_, v) in zip(x.top, y.top)) < 1e-5, "alternatives differ beyond a near-tie"
        gap = max(gap, abs(x.logprob - y.logprob), *(abs(u - v) for (_, u), (_, v) in zip(x.top, y.top)))
    return gap


def drive(engine: Engine, reqs: list[Req], max_ticks: int = 5000, check=True) -> Run:
    """Feed requests at their arrival ticks, abort at their abort ticks, tick until idle.

    Checks the engine's invariants after every tick, and that a finished
    request never gains another token.
    """
    run = Run()
    ids: dict[int, int] = {}
    finished: set[int] = set()
    z0, s0 = engine.zombie_rows, engine.steps
    tick = 0
    last_arrival = max((r.arrival for r in reqs), default=0)
    while tick <= last_arrival or not engine.idle:
        for i, r in enumerate(reqs):
            if r.arrival == tick:
                ids[i] = engine.add_request(r.prompt, r.params, r.response_format)
                run.tokens[i] = []
            if r.abort_at == tick and i in ids:
                engine.abort(ids[i])
        by_id = {v: k for k, v in ids.items()}
        for d in engine.step():
            i = by_id[d.req_id]
            assert i not in finished, "a finished request gained a token"
            run.tokens[i].extend(d.token_ids)
            if d.finished:
                finished.add(i)
                run.reasons[i] = d.finish_reason
        if check:
            engine.check_invariants()
        tick += 1
        assert tick < max_ticks, "workload did not finish"
    for i, rid in ids.items():
        run.outputs[i] = engine.requests.output(rid, forget=True)
    run.zombie_rows = engine.zombie_rows - z0
    run.steps = engine.steps - s0
    return run
