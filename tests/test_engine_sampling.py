"""The engine's sampling contract end to end: penalties and logprobs on the device equal a
host reference, nothing a request carries can hurt the device, and seeds behave."""
from __future__ import annotations

import pytest
import torch

from photon_trace.engine.model.batch import make_forward_batch
from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.model.loader import load_model
from photon_trace.engine.params import SamplingParams
from helpers.inprocess_device import in_process_engine
from helpers.reference_generate import generate as reference_generate

PROMPTS = [[5, 9, 200, 31, 7], [100, 101, 102], [42] * 11]


@pytest.fixture
def engines(tiny_engines):
    """The session's real tiny engines (conftest, seed 0), blocking and pipelined."""
    return tiny_engines[1], tiny_engines[2]


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny")


def test_penalised_greedy_equals_a_host_reference_at_both_depths(engines, tiny):
    """The device keeps per-row token counts; the reference counts on the host."""
    for presence, frequency in ((1.5, 0.0), (0.0, 2.0), (-0.5, 0.8)):
        expect = reference_generate(tiny.model, tiny.tokenizer, PROMPTS, max_new_tokens=24, stop_on_eos=False,
                                    presence_penalty=presence, frequency_penalty=frequency).token_ids
        params = SamplingParams(max_tokens=24, ignore_eos=True, presence_penalty=presence,
                                frequency_penalty=frequency)
        for engine in engines:
            got = [o.token_ids for o in engine.generate(PROMPTS, params)]
            assert got == expect, f"presence {presence}, frequency {frequency}, depth {engine.config.depth}"
    plain = reference_generate(tiny.model, tiny.tokenizer, PROMPTS, max_new_tokens=24, stop_on_eos=False).token_ids
    assert plain != expect, "the penalties changed nothing: the test would not notice them missing"


def test_a_row_reused_by_a_penalised_request_starts_from_zero_counts(engines):
    """Counts live per token-table row; a row that served another request restarts at a first draw."""
    _, engine = engines
    p = SamplingParams(max_tokens=16, ignore_eos=True, frequency_penalty=2.0)
    first = [o.token_ids for o in engine.generate(PROMPTS, p)]
    engine.generate([[7] * 5] * 12, SamplingParams(max_tokens=20, ignore_eos=True, presence_penalty=1.0))
    again = [o.token_ids for o in engine.generate(PROMPTS, p)]
    assert again == first


def test_logprobs_are_log_softmax_of_the_model_logits(engines, tiny):
    """Greedy, so each token's logits are those of prompt + tokens so far: one full forward checks all."""
    prompt = PROMPTS[0]
    for engine in engines:
        out = engine.generate([prompt], SamplingParams(max_tokens=8, ignore_eos=True, logprobs=5))[0]
        seq = prompt + out.token_ids
        pages = list(range(1, -(-len(seq) // 16) + 1))
        kv = KVPool(tiny.config, len(pages) + 1, 16)
        with torch.inference_mode():
            logits = tiny.model(make_forward_batch([(seq, 0, pages)], 16), kv, all_logits=True)
        expect = torch.log_softmax(logits[len(prompt) - 1:-1].float(), dim=-1)
        for i, lp in enumerate(out.logprobs):
            assert lp.token_id == out.token_ids[i]
            assert abs(lp.logprob - expect[i, lp.token_id].item()) < 1e-4
            top = expect[i].topk(5)
            assert [t for t, _ in lp.top] == top.indices.tolist()
            assert max(abs(v - e) for (_, v), e in zip(lp.top, top.values.tolist())) < 1e-4


def test_nothing_a_request_carries_can_hurt_the_device(engines):
    """top_k past the vocabulary (or 2**63) is every token, as in transformers; a temperature
    too small to divide by is greedy; bad values never reach the engine."""
    _, engine = engines
    vocab = engine.model_config.vocab_size
    base = dict(temperature=0.9, seed=11, max_tokens=6, ignore_eos=True)
    unfiltered = engine.generate(PROMPTS, SamplingParams(**base))
    for k in (vocab, vocab + 1, 2**63):
        got = engine.generate(PROMPTS, SamplingParams(**base, top_k=k))
        assert [o.token_ids for o in got] == [o.token_ids for o in unfiltered]
    greedy = engine.generate(PROMPTS, SamplingParams(max_tokens=6, ignore_eos=True))
    tiny_t = engine.generate(PROMPTS, SamplingParams(temperature=1e-40, max_tokens=6, ignore_eos=True))
    assert [o.token_ids for o in tiny_t] == [o.token_ids for o in greedy]
    for bad in ([1.5, 2], [True], ["a"], [vocab], [-1]):
        with pytest.raises(ValueError):
            engine.add_request(bad, SamplingParams())
    with pytest.raises(ValueError):
        engine.add_request([1, 2], {"temperature": 1.0})
    assert engine.idle
    assert engine.generate([[1, 2, 3]], SamplingParams(max_tokens=2))[0].finish_reason == "length"


def test_unseeded_runs_differ_and_a_recorded_seed_replays_them():
    """Without a seed the engine draws its own from the OS and records it; given back, the run repeats.

    Seeds are the host's: three fresh engines on the in-process device (``helpers/inprocess_device.py``,
    the worker's sampling ops; ``test_pipeline_equivalence`` holds it to the worker's tokens)."""
    from photon_trace.telemetry.recording.recorder import RecordingTracer

    p = SamplingParams(temperature=1.0, max_tokens=12, ignore_eos=True)
    runs = []
    for seed in (None, None):
        tracer = RecordingTracer(keep=True)
        with in_process_engine(2, seed=seed, tracer=tracer) as engine:
            runs.append((engine.config.seed, [o.token_ids for o in engine.generate(PROMPTS, p)]))
        header = tracer.snapshot().header
        assert header["seed"] == header["settings"]["seed"] == engine.config.seed is not None
    (seed_a, tokens_a), (seed_b, tokens_b) = runs
    assert seed_a != seed_b and tokens_a != tokens_b
    with in_process_engine(1, seed=seed_a) as engine:
        assert [o.token_ids for o in engine.generate(PROMPTS, p)] == tokens_a


def test_the_context_limit_is_in_tokens_not_pages():
    """Page size 16, a 40-token context: 48 tokens fit in its 3 pages, but not in the context.
    The limit is the scheduler's: the engine runs on the in-process device."""
    from photon_trace.engine.pages import PageAllocator
    from photon_trace.engine.scheduler import Scheduler

    sched = Scheduler(PageAllocator(64), page_size=16, max_rows=4, max_step_tokens=64, max_seqs=4, max_context=40)
    with pytest.raises(ValueError, match=r"prompt \(30 tokens\) \+ max_tokens \(18\) exceeds the context of 40"):
        sched.check_fits(30, 18)
    sched.check_fits(30, 10)
    with in_process_engine(2, max_context=40, page_size=16) as engine:
        with pytest.raises(ValueError, match="context of 40 tokens"):
            engine.add_request([1] * 30, SamplingParams(max_tokens=18))
        out = engine.generate([[1] * 30], SamplingParams(max_tokens=10, ignore_eos=True))[0]
        assert len(out.token_ids) == 10


def test_logprobs_and_penalties_add_no_host_wait(engines):
    """Traced at both depths, with constrained rows among them: the only host wait per step is
    the commit's expected one; logprobs travel in the copy-back that carries the tokens."""
    from photon_trace.engine.constraints import ResponseFormat
    from photon_trace.telemetry.recording.recorder import RecordingTracer
    from photon_trace.traced_run import attached
    from helpers.engine_helpers import Req, drive, logprob_gap

    reqs = [Req(i, [(7 * i + j) % 200 + 1 for j in range(5 + 3 * i)],
                SamplingParams(max_tokens=6 + i, ignore_eos=True, temperature=0.0 if i % 2 else 0.9, seed=i,
                               logprobs=[None, 0, 5, 20][i % 4], presence_penalty=0.5 * (i % 3),
                               frequency_penalty=0.3 * (i % 2)),
                response_format=ResponseFormat("point", max_count=2) if i == 3 else None) for i in range(6)]
    outputs = []
    for engine in engines:      # blocking, then pipelined
        tracer = RecordingTracer(keep=True, flush_interval_s=0.05)
        with attached(engine, tracer):
            run = drive(engine, reqs)
        tracer.close()
        trace = tracer.snapshot()
        assert trace.waits and all(w.expected for w in trace.waits), [w for w in trace.waits if not w.expected]
        assert len(trace.waits) == run.steps
        outputs.append([(o.token_ids, o.logprobs) for o in run.outputs.values()])
    assert [t for t, _ in outputs[0]] == [t for t, _ in outputs[1]]
    gap = max(logprob_gap(a, b) for (_, a), (_, b) in zip(*outputs))
    print(f"largest logprob difference between depths: {gap:.1e}")
    assert gap < 1e-5 and any(lps for _, lps in outputs[0])
