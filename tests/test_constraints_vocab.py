"""Token bytes of Hugging Face vocabularies, checked against the tokenizers' own decoding."""
from __future__ import annotations

import pytest
import xgrammar as xgr

from helpers.constraint_tokenizers import byte_fallback_bpe, byte_level_bpe, project_hf
from photon_trace.engine.constraints import ConstraintError, grammar_vocab, hf_vocab_bytes
from photon_trace.engine.model.tokenizer import ByteTokenizer

TEXTS = ['{"name": "Ada", "ok": true}', "naïve café — 東京 🚀", "tabs\tand\nnewlines  x"]


@pytest.mark.parametrize("text", TEXTS)
def test_byte_level_token_bytes_concatenate_to_the_decoded_text(text):
    tok = byte_level_bpe()
    table = grammar_vocab(tok).token_bytes
    ids = tok.encode(text, add_special_tokens=False)
    assert b"".join(table[i] for i in ids).decode() == tok.decode(ids) == text


@pytest.mark.parametrize("text", TEXTS)
def test_byte_fallback_token_bytes_concatenate_to_the_decoded_text(text):
    tok = byte_fallback_bpe()
    table = grammar_vocab(tok).token_bytes
    ids = tok.encode(text, add_special_tokens=False)
    # The normalizer prepends "▁"; the decoder's Strip removes that one space again.
    assert b"".join(table[i] for i in ids).decode() == " " + tok.decode(ids) == " " + text


@pytest.mark.parametrize("build", [byte_level_bpe, byte_fallback_bpe])
def test_agrees_with_xgrammars_own_reading_of_the_vocabulary(build):
    tok = build()
    ours = hf_vocab_bytes(tok.backend_tokenizer)
    theirs = xgr.TokenizerInfo.from_huggingface(tok).decoded_vocab
    special = set(tok.all_special_ids)
    assert len(ours) == len(theirs)
    assert all(ours[i] == theirs[i] for i in range(len(ours)) if i not in special)
    assert all(ours[i] == b"" for i in special)


@pytest.mark.parametrize("name, build", [("byte_level", byte_level_bpe), ("byte_fallback", byte_fallback_bpe)])
def test_our_hf_tokenizer_and_the_transformers_one_read_the_same(name, build):
    """HFTokenizer.token_bytes (what the engine streams) and hf_vocab_bytes agree id for id."""
    ours, theirs = grammar_vocab(project_hf(name)), grammar_vocab(build())
    assert ours == theirs


def test_eos_comes_from_the_tokenizer():
    assert grammar_vocab(byte_level_bpe()).eos_ids == (byte_level_bpe().eos_token_id,)
    vocab = grammar_vocab(ByteTokenizer())
    assert vocab.eos_ids == tuple(ByteTokenizer().eos_token_ids)
    assert vocab.token_bytes[:256] == tuple(bytes([b]) for b in range(256))
    assert not any(vocab.token_bytes[256:])  # specials and bins are never text


def test_a_bare_tokenizers_object_has_no_eos_to_end_on():
    with pytest.raises(ConstraintError, match="has no EOS token"):
        grammar_vocab(byte_level_bpe().backend_tokenizer)
