"""Parity with the reference implementation (Hugging Face transformers).

Random small Llama / Qwen2 / Qwen3 / Mistral models are saved with ``save_pretrained`` and
loaded through photon_trace. Mistral's sliding window (8) and a Qwen2 window on its
upper layer only are much smaller than prompt + output, so attention past the
window is checked at every position, in every chunking. Weights get a larger spread than the default 0.02
(and non-trivial norms and biases) so greedy decoding is diverse and a wrong
detail cannot hide behind a repeated token.
"""
from __future__ import annotations

import random

import pytest
import torch

transformers = pytest.importorskip("transformers")

from photon_trace.engine.model.kv_pool import KVPool  # noqa: E402
from photon_trace.engine.pages import PageAllocator  # noqa: E402
from photon_trace.engine.model.loader import load_model  # noqa: E402
from helpers.reference_generate import generate  # noqa: E402
from photon_trace.engine.model.batch import make_forward_batch  # noqa: E402

PAGE_SIZE = 4
VOCAB = 384
PROMPT_LENGTHS = (3, 11, 26, 40)
NEW_TOKENS = 32
TOL = 1e-4


def write_byte_level_tokenizer(folder) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(folder / "tokenizer.json"))


def hf_config(kind: str):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  rms_norm_eps=1e-5, initializer_range=0.15, bos_token_id=None, eos_token_id=None,
                  pad_token_id=None)
    if kind == "llama":  # Llama 3 rope scaling, untied
        return transformers.LlamaConfig(
            **common, tie_word_embeddings=False, rope_theta=50000.0,
            rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
    if kind == "qwen2":  # q/k/v bias, tied embeddings
        return transformers.Qwen2Config(**common, tie_word_embeddings=True, rope_theta=1e6)
    if kind == "qwen3":  # per-head q/k norm, head_dim decoupled from hidden / heads
        return transformers.Qwen3Config(**common, head_dim=32, tie_word_embeddings=False)
    if kind == "mistral":  # every layer attends through a window of 8 keys
        return transformers.MistralConfig(**common, sliding_window=WINDOW, tie_word_embeddings=False)
    if kind == "qwen2_window":  # the window on layers >= max_window_layers only
        return transformers.Qwen2Config(**common, tie_word_embeddings=True, use_sliding_window=True,
                                        sliding_window=WINDOW, max_window_layers=1)
    raise ValueError(kind)


WINDOW = 8
MODEL_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                 "mistral": "MistralForCausalLM", "qwen2_window": "Qwen2ForCausalLM"}


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3", "mistral", "qwen2_window"])
def models(request, tmp_path_factory):
    kind = request.param
    torch.manual_seed(1234)
    hf = getattr(transformers, MODEL_CLASSES[kind])(hf_config(kind)).eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif name.endswith("bias"):
                param.copy_(0.2 * torch.randn_like(param))
    folder = tmp_path_factory.mktemp(kind)
    # The Llama model is saved in shards to exercise model.safetensors.index.json.
    hf.save_pretrained(folder, max_shard_size="100KB" if kind == "llama" else "5GB")
    write_byte_level_tokenizer(folder)
    if kind == "llama":
        assert (folder / "model.safetensors.index.json").is_file()
    ours = load_model(str(folder), dtype="float32")
    if kind in ("mistral", "qwen2_window"):
        layers = (0, 1) if kind == "mistral" else (1,)
        assert (ours.config.sliding_window, ours.config.sliding_layers) == (WINDOW, layers)
    continuations = [hf_greedy(hf, p) for p in prompts()]
    return kind, hf, ours, continuations


def prompts() -> list[list[int]]:
    rng = random.Random(7)
    return [[rng.randrange(VOCAB) for _ in range(n)] for n in PROMPT_LENGTHS]


def hf_greedy(hf, prompt: list[int]) -> list[int]:
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, do_sample=False,
                          min_new_tokens=NEW_TOKENS, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def test_greedy_continuations_match_hf_token_for_token(models):
    kind, _, ours, continuations = models
    result = generate(ours.model, ours.tokenizer, prompts(), max_new_tokens=NEW_TOKENS, stop_on_eos=False)
    for prompt, got, expected in zip(prompts(), result.token_ids, continuations):
        assert len(set(expected)) >= 12, f"{kind}: reference continuation is not diverse: {expected}"
        assert got == expected, f"{kind}: prompt of {len(prompt)} tokens diverged"


def hf_logits(hf, seqs: list[list[int]]) -> list[torch.Tensor]:
    with torch.no_grad():
        return [hf(torch.tensor([s])).logits[0] for s in seqs]


def shuffled_pages(seqs: list[list[int]], seed: int) -> tuple[list[int], list[list[int]], int]:
    """Pages for every sequence, taken from a shuffled free list so no row's pages are contiguous."""
    need = [-(-len(s) // PAGE_SIZE) for s in seqs]
    pool_pages = sum(need) * 2 + 1
    allocator = PageAllocator(pool_pages)
    all_pages = allocator.alloc(pool_pages - 1)
    random.Random(seed).shuffle(all_pages)
    out, i = [], 0
    for n in need:
        out.append(all_pages[i:i + n])
        i += n
    return all_pages, out, pool_pages


def run_chunked(ours, seqs: list[list[int]], chunk_sizes: list[int], seed: int) -> list[torch.Tensor]:
    """All-token logits of each sequence, fed in chunks (chunk size 1 = token-by-token decode).

    A row that has finished stays in the batch as a padding row (page table of
    zeros, context 1, slot 0), as the pipelined engine pads decode batches.
    """
    _, pages, pool_pages = shuffled_pages(seqs, seed)
    kv = KVPool(ours.config, pool_pages, PAGE_SIZE, torch.float32)
    width = max(len(p) for p in pages)
    done = [0] * len(seqs)
    logits: list[list[torch.Tensor]] = [[] for _ in seqs]
    with torch.inference_mode():
        while any(d < len(s) for d, s in zip(done, seqs)):
            rows, live = [], []
            for i, (seq, size) in enumerate(zip(seqs, chunk_sizes)):
                if done[i] < len(seq):
                    rows.append((seq[done[i]: done[i] + size], done[i], pages[i]))
                    live.append(i)
                else:
                    rows.append(([0], 0, [0]))
            batch = make_forward_batch(rows, PAGE_SIZE, pages_per_row=width)
            out = ours.model(batch, kv, all_logits=True)
            assert torch.isfinite(out).all(), "padding rows must give finite logits"
            starts = batch.query_start.tolist()
            for i in live:
                logits[i].append(out[starts[i]: starts[i + 1]])
                done[i] += starts[i + 1] - starts[i]
    return [torch.cat(chunks) for chunks in logits]


@pytest.mark.parametrize("mode", ["one_chunk", "chunks", "decode", "mixed"])
def test_fp32_logits_match_hf_at_every_position(models, mode):
    kind, hf, ours, continuations = models
    seqs = [p + c[:8] for p, c in zip(prompts(), continuations)]
    chunk_sizes = {"one_chunk": [max(map(len, seqs))] * len(seqs),
                   "chunks": [5, 7, 9, 16],
                   "decode": [1] * len(seqs),
                   # single-token rows between chunked ones: attention takes the runs apart
                   "mixed": [1, 9, 1, 16]}[mode]
    got = run_chunked(ours, seqs, chunk_sizes, seed=len(mode))
    for seq, g, e in zip(seqs, got, hf_logits(hf, seqs)):
        assert g.shape == e.shape
        delta = (g - e).abs().max().item()
        print(f"{kind}/{mode}: max |logit delta| {delta:.2e}, max |logit| {e.abs().max().item():.1f}")
        assert delta < TOL, f"{kind}/{mode}: max |logit delta| {delta:.2e} over {len(seq)} positions"


def test_logits_into_caller_buffer_match_returned_logits(models):
    ours = models[2]
    seqs = prompts()
    _, pages, pool_pages = shuffled_pages(seqs, seed=3)
    rows = [(s, 0, p) for s, p in zip(seqs, pages)]
    batch = make_forward_batch(rows, PAGE_SIZE)
    out = torch.full((len(seqs), ours.config.vocab_size), float("nan"))
    with torch.inference_mode():
        kv = KVPool(ours.config, pool_pages, PAGE_SIZE)
        returned = ours.model(batch, kv, out_logits=out)
        full = ours.model(batch, KVPool(ours.config, pool_pages, PAGE_SIZE), all_logits=True)
    assert returned.data_ptr() == out.data_ptr()
    torch.testing.assert_close(out, full[batch.logits_index])
