"""ByteTokenizer's fixed ids, HFTokenizer over tokenizer.json, and streaming detokenisation."""
from __future__ import annotations

import pytest

import photon_trace.engine.model.tokenizer as tk
from photon_trace.engine.model.tokenizer import ByteTokenizer, HFTokenizer, IncrementalDetokenizer, Tokenizer


def test_byte_tokenizer_ids_are_fixed():
    assert (tk.PAD_ID, tk.BOS_ID, tk.EOS_ID) == (256, 257, 258)
    assert (tk.COORD_BASE, tk.NUM_COORD_BINS, tk.SIZE_BASE, tk.NUM_SIZE_BINS) == (259, 1024, 1283, 1024)
    assert tk.BYTE_VOCAB_SIZE == 2307
    t = ByteTokenizer()
    assert t.vocab_size == 2307 and t.eos_token_ids == (258,) and t.bos_token_id == 257
    assert (t.COORD_BASE, t.SIZE_BASE, t.PAD_ID) == (259, 1283, 256)
    assert t.token_name(259) == "<coord_0>" and t.token_name(2306) == "<size_1023>"
    assert isinstance(t, Tokenizer)


def test_byte_tokenizer_round_trips_unicode():
    t = ByteTokenizer()
    text = "Hello, мир! 点 🚀"
    ids = t.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert t.decode(ids) == text
    assert t.encode("a", add_special_tokens=True) == [257, 97]


def test_specials_bins_and_ids_past_the_vocab_decode_to_nothing():
    t = ByteTokenizer()
    ids = [72, 256, 257, 258, 259, 1500, 2306, 2307, 2559, 105]
    assert t.decode(ids) == "Hi"
    assert t.decode_bytes(ids) == b"Hi"
    assert t.token_bytes(65) == b"A" and t.token_bytes(300) == b"" and t.token_bytes(5000) == b""


def test_invalid_utf8_decodes_to_replacement_chars():
    assert ByteTokenizer().decode([0xFF, 0x41, 0xC3]) == "\ufffdA\ufffd"


def test_incremental_detokenizer_holds_back_incomplete_utf8():
    t = ByteTokenizer()
    stream = IncrementalDetokenizer(t)
    pieces = [stream.push([i]) for i in "é🚀x".encode("utf-8")]
    assert pieces == ["", "é", "", "", "", "🚀", "x"]
    assert stream.push([0xE2, 0x82]) == ""
    assert stream.flush() == "\ufffd"


@pytest.fixture()
def byte_level_json(tmp_path):
    from tokenizers import Tokenizer as HF, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab["Ġhe"] = 256
    tok = HF(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|end|>"])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def test_hf_byte_level_tokenizer(byte_level_json):
    t = HFTokenizer(byte_level_json, eos_token_ids=[257])
    assert isinstance(t, Tokenizer)
    assert t.vocab_size == 258 and t.eos_token_ids == (257,)
    text = "say hé ✓"
    ids = t.encode(text)
    assert t.decode(ids) == text
    assert t.decode_bytes(ids) == text.encode("utf-8")
    assert t.token_bytes(256) == b" he"
    assert t.token_bytes(257) == b""  # special
    assert t.decode([*ids, 257]) == text
    assert t.encode("x", add_special_tokens=True) == t.encode("x")  # the tokenizer adds nothing


def test_hf_sentencepiece_style_byte_fallback(tmp_path):
    from tokenizers import Tokenizer as HF, models

    vocab = {"<unk>": 0, "▁hi": 1, "<0x41>": 2, "a": 3}
    tok = HF(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tok.add_special_tokens(["<unk>"])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    t = HFTokenizer(path)
    assert t.token_bytes(1) == b" hi" and t.token_bytes(2) == b"A" and t.token_bytes(0) == b""
    assert t.encode("a") == [3]
