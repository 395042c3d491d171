"""Stop strings fire whatever their length in tokens: the window the stop check decodes is
sized in bytes, so a stop string spanning 24 byte-level tokens (six emoji) still ends a request."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from photon_trace.engine.model.tokenizer import ByteTokenizer
from photon_trace.engine.params import SamplingParams
from photon_trace.engine.request_book import RequestBook
from photon_trace.engine.sequence import FinishReason
from photon_trace.telemetry.tracer import NULL_TRACER

STOP = "🎉" * 6          # 24 bytes: 24 tokens of a byte-level tokenizer


def feed(tokenizer, text: str, stop: str, vocab: int):
    book = RequestBook(tokenizer, SimpleNamespace(vocab_size=vocab, eos_token_ids=()), NULL_TRACER)
    seq = book.create([1, 2], SamplingParams(max_tokens=500, stop=(stop,)), seed=0, response_format=None)
    book.register(seq)
    ids = tokenizer.encode(text)
    for i, token in enumerate(ids):
        book.accept(seq, token)
        if seq.finalized:
            return seq, book, i + 1, len(ids)
    return seq, book, None, len(ids)


@pytest.mark.parametrize("tokenizer", ["bytes", "byte_level_bpe"])
def test_a_stop_string_of_24_tokens_fires_on_its_last_token(tokenizer):
    if tokenizer == "bytes":
        tok, vocab = ByteTokenizer(), ByteTokenizer().vocab_size
    else:
        from helpers.constraint_tokenizers import project_hf
        tok = project_hf("byte_level")
        vocab = tok.vocab_size
    before = "Ready? é✓ " * 3
    seq, book, stopped_at, n = feed(tok, before + STOP + " and more text after", STOP, vocab)
    assert len(tok.encode(STOP)) >= 24
    assert stopped_at == len(tok.encode(before + STOP)), "the stop string did not fire on its last token"
    assert seq.finish_reason is FinishReason.STOP
    assert book.text(seq) == before


def test_a_stop_string_never_fires_early_or_on_a_prefix():
    tok = ByteTokenizer()
    seq, _, stopped_at, _ = feed(tok, "🎉" * 5 + "x" + "🎉" * 5, STOP, tok.vocab_size)
    assert stopped_at is None and not seq.finalized
