"""The bytes each token stands for, which is all xgrammar needs to know about a tokenizer.

A grammar matches bytes; special tokens (and any id that is not text, such as the byte
tokenizer's coordinate bins) are given as ``b""``, which xgrammar treats as never matching.
Hugging Face vocabularies store token strings in an encoding chosen by the tokenizer's
decoder (GPT-2 byte-level characters, SentencePiece ``▁`` and ``<0xAB>`` byte fallback);
``hf_vocab_bytes`` undoes it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from photon_trace.engine.constraints.spec import ConstraintError
from photon_trace.engine.model.tokenizer import byte_level_alphabet


@dataclass(frozen=True, slots=True)
class GrammarVocab:
    """A tokenizer as the grammar engine sees it."""

    token_bytes: tuple[bytes, ...]  # index = token id; b"" for ids that are never text
    eos_ids: tuple[int, ...]


def grammar_vocab(tokenizer: Any) -> GrammarVocab:
    """Token bytes and EOS ids of a tokenizer.

    Our tokenizers (ByteTokenizer, HFTokenizer) say it themselves through ``token_bytes``
    (b"" for specials and bins), the same bytes the detokenizer streams; a
    `tokenizers.Tokenizer` or a transformers fast tokenizer is read by `hf_vocab_bytes`.
    """
    if hasattr(tokenizer, "token_bytes"):
        table = [bytes(tokenizer.token_bytes(i)) for i in range(tokenizer.vocab_size)]
    else:
        backend = _hf_backend(tokenizer)
        if backend is None:
            raise ConstraintError(f"cannot read the vocabulary of {type(tokenizer).__name__} for grammar constraints")
        table = hf_vocab_bytes(backend)
    eos = _ids(getattr(tokenizer, "eos_token_ids", None)) or _ids(getattr(tokenizer, "eos_token_id", None))
    if not eos:
        raise ConstraintError(f"{type(tokenizer).__name__} has no EOS token; a constrained answer needs one to end")
    for i in eos:  # an EOS is a stop token, never text
        if i < len(table):
            table[i] = b""
    return GrammarVocab(tuple(table), tuple(eos))


def _ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def _hf_backend(tokenizer: Any) -> Any:
    import tokenizers

    if isinstance(tokenizer, tokenizers.Tokenizer):
        return tokenizer
    inner = getattr(tokenizer, "backend_tokenizer", None)  # transformers' fast tokenizers
    return inner if isinstance(inner, tokenizers.Tokenizer) else None


def _decoder_types(decoder: dict | None) -> list[dict]:
    if not decoder:
        return []
    if decoder.get("type") == "Sequence":
        return [d for sub in decoder.get("decoders", []) for d in _decoder_types(sub)]
    return [decoder]


def hf_vocab_bytes(tokenizer: Any) -> list[bytes]:
    """Bytes of every id of a `tokenizers.Tokenizer` (special added tokens as b"").

    Supports byte-level (GPT-2 style), SentencePiece-style (``▁`` spaces, ``<0xAB>`` byte
    fallback, Replace decoders) and plain vocabularies; WordPiece ``##`` continuation
    prefixes are stripped (the spaces its decoder inserts between words are not modelled).
    """
    spec = json.loads(tokenizer.to_str())
    decoders = _decoder_types(spec.get("decoder"))
    kinds = {d.get("type") for d in decoders}
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    table: list[bytes] = [b""] * size

    if "ByteLevel" in kinds:
        inverse = byte_level_alphabet()

        def to_bytes(piece: str) -> bytes:
            return b"".join(bytes([inverse[c]]) if c in inverse else c.encode() for c in piece)
    else:
        replacements = []
        for d in decoders:
            if d.get("type") == "Replace":
                pattern = d.get("pattern", {})
                if "String" in pattern:
                    replacements.append((pattern["String"], d.get("content", "")))
            elif d.get("type") == "Metaspace":
                replacements.append((d.get("replacement", "▁"), " "))
            elif d.get("type") == "WordPiece":
                replacements.append(("\0wordpiece", d.get("prefix", "##")))
        byte_fallback = "ByteFallback" in kinds

        def to_bytes(piece: str) -> bytes:
            if byte_fallback and len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                try:
                    return bytes([int(piece[3:5], 16)])
                except ValueError:
                    pass
            for old, new in replacements:
                if old == "\0wordpiece":
                    if piece.startswith(new):
                        piece = piece[len(new):]
                else:
                    piece = piece.replace(old, new)
            return piece.encode()

    for piece, i in tokenizer.get_vocab(with_added_tokens=False).items():
        if i < size:
            table[i] = to_bytes(piece)
    for added in spec.get("added_tokens", []):
        i = added["id"]
        if i < size:
            table[i] = b"" if added.get("special", False) else added["content"].encode()
    return table
