"""A plain, blocking, greedy batch generate over the paged model: the reference the tests
compare the model (against transformers) and the pipelined engine with.

Prefill every prompt in one forward, then decode the live rows one token per forward,
reading each step's tokens back on the host. No sampling: the engine's sampler is
tested on its own (``test_sampling.py``). OpenAI's presence and frequency penalties
are applied here on the host, from Python counts, as the reference for the device's.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from photon_trace.engine.model.batch import RowInput, make_forward_batch
from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.pages import PageAllocator, pages_needed
from photon_trace.engine.model.decoder import DecoderModel
from photon_trace.engine.model.tokenizer import Tokenizer


class KVPoolExhausted(RuntimeError):
    """The pool has fewer free pages than a request needs."""


def check_prompt_length(num_prompt_tokens: int, max_context: int) -> None:
    """Raise ValueError unless the prompt leaves room for at least one generated token.
    (The engine checks prompt + max_tokens against its context in ``Scheduler.check_fits``.)"""
    if num_prompt_tokens < 1:
        raise ValueError("empty prompt: at least one token is needed")
    if num_prompt_tokens >= max_context:
        raise ValueError(f"prompt of {num_prompt_tokens} tokens does not fit the model's context of "
                         f"{max_context} tokens (at most {max_context - 1} leave room to generate)")


@dataclass(slots=True)
class GenerateResult:
    texts: list[str]
    token_ids: list[list[int]]      # generated tokens of each prompt (EOS included when hit)
    finish_reasons: list[str]       # "eos" or "length"
    prefill_seconds: float
    seconds: float                  # prefill + decode

    @property
    def num_generated(self) -> int:
        return sum(len(t) for t in self.token_ids)

    @property
    def tokens_per_s(self) -> float:
        return self.num_generated / self.seconds if self.seconds > 0 else 0.0


@torch.inference_mode()
def generate(model: DecoderModel, tokenizer: Tokenizer, prompts: Sequence[str] | Sequence[Sequence[int]],
             max_new_tokens: int = 32, page_size: int = 16,
             kv: KVPool | None = None, allocator: PageAllocator | None = None,
             stop_on_eos: bool = True, presence_penalty: float = 0.0,
             frequency_penalty: float = 0.0) -> GenerateResult:
    """Generate up to ``max_new_tokens`` per prompt (strings are encoded with BOS).

    Pages for each sequence's whole length are taken up front and all returned
    at the end, whatever happens; a pool too small raises KVPoolExhausted.
    """
    config = model.config
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    if kv is not None:
        page_size = kv.page_size
    seqs = [tokenizer.encode(p, add_special_tokens=True) if isinstance(p, str) else list(p) for p in prompts]
    for seq in seqs:
        check_prompt_length(len(seq), config.max_position)
    budgets = [min(max_new_tokens, config.max_position - len(s)) for s in seqs]
    need = [pages_needed(len(s) + n, page_size) for s, n in zip(seqs, budgets)]
    if kv is None:
        kv = KVPool(config, max(2, sum(need) + 1), page_size, model.dtype, model.device)
    allocator = allocator if allocator is not None else PageAllocator(kv.num_pages)
    eos = set(config.eos_token_ids) | set(tokenizer.eos_token_ids) if stop_on_eos else set()

    page_lists: list[list[int]] = []
    try:
        for n in need:
            pages = allocator.alloc(n)
            if pages is None:
                raise KVPoolExhausted(f"KV pool has {allocator.num_free} free pages, "
                                      f"{sum(need)} needed for {len(seqs)} sequences")
            page_lists.append(pages)
        outputs: list[list[int]] = [[] for _ in seqs]
        reasons = ["length"] * len(seqs)
        start = time.perf_counter()
        rows: list[RowInput] = [(s, 0, p) for s, p in zip(seqs, page_lists)]
        live = list(range(len(seqs)))
        prefill_seconds = 0.0
        while live:
            batch = make_forward_batch(rows, page_size, device=model.device)
            logits = model(batch, kv).float()
            for row, i in enumerate(live):
                for token in set(outputs[i]):
                    logits[row, token] -= presence_penalty + frequency_penalty * outputs[i].count(token)
            tokens = logits.argmax(dim=-1).tolist()
            if not prefill_seconds:
                prefill_seconds = time.perf_counter() - start
            still = []
            for i, token in zip(live, tokens):
                outputs[i].append(token)
                if token in eos:
                    reasons[i] = "eos"
                elif len(outputs[i]) < budgets[i]:
                    still.append(i)
            live = still
            rows = [([outputs[i][-1]], len(seqs[i]) + len(outputs[i]) - 1, page_lists[i]) for i in live]
        seconds = time.perf_counter() - start
    finally:
        for pages in page_lists:
            allocator.free(pages)
    texts = [tokenizer.decode(out) for out in outputs]
    return GenerateResult(texts, outputs, reasons, prefill_seconds, seconds)
