"""Small real Hugging Face tokenizers for the constraint tests, built offline in milliseconds."""
from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from photon_trace.engine.model.tokenizer import HFTokenizer

CORPUS = [
    '{"name": "Ada", "age": 36, "tags": ["math", "engine"], "ok": true, "pi": 3.14}',
    '[1, 2, 3, null, false, {"a": {"b": []}}]',
    "The quick brown fox jumps over the lazy dog. 0123456789 + - * / ( ) @ . com org",
    "user@example.com admin@test.org #ff00aa #00ff00 yes no maybe 555-1234",
] * 4

HF_PAD_TO = 512  # model vocabulary larger than the tokenizer's: the padding ids must never be allowed


@cache
def byte_level_bpe() -> PreTrainedTokenizerFast:
    """GPT-2 style: byte-level pre-tokenizer and decoder, BPE merges trained on CORPUS."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<pad>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")


@cache
def byte_fallback_bpe() -> PreTrainedTokenizerFast:
    """SentencePiece style: ``▁`` for spaces, ``<0xAB>`` byte-fallback pieces, a few merged pieces."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    pieces = ["▁", *"abcdefghijklmnopqrstuvwxyz0123456789{}[]\":,.-@#", "▁the", "▁fox", '{"', '":', "true",
              "false", "null", "▁\"", "com", "ab", "▁1", "]}"]
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", bos_token="<s>", unk_token="<unk>")


@cache
def project_hf(name: str) -> HFTokenizer:
    """Our HFTokenizer over the tokenizer.json of `byte_level_bpe` or `byte_fallback_bpe`."""
    fast = {"byte_level": byte_level_bpe, "byte_fallback": byte_fallback_bpe}[name]()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tokenizer.json"
        fast.backend_tokenizer.save(str(path))
        return HFTokenizer(path, eos_token_ids=[fast.eos_token_id])
