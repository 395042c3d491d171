"""Tokenizers: the protocol the engine uses, a byte-level one with fixed ids, and
a wrapper over a Hugging Face ``tokenizer.json`` that encodes as ``AutoTokenizer`` does.

``token_bytes`` exposes each token's raw bytes so grammar engines can build
token masks; special tokens have no bytes.
"""
from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

# ByteTokenizer ids. Fixed: the constraint engine relies on them.
NUM_BYTES = 256
PAD_ID = 256
BOS_ID = 257
EOS_ID = 258
COORD_BASE = 259          # 1024 coordinate bins: COORD_BASE + i, i in [0, 1024)
NUM_COORD_BINS = 1024
SIZE_BASE = COORD_BASE + NUM_COORD_BINS  # 1283; 1024 size bins
NUM_SIZE_BINS = 1024
BYTE_VOCAB_SIZE = SIZE_BASE + NUM_SIZE_BINS  # 2307


@runtime_checkable
class Tokenizer(Protocol):
    vocab_size: int
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...
    def decode(self, ids: Iterable[int]) -> str: ...
    def decode_bytes(self, ids: Iterable[int]) -> bytes: ...
    def token_bytes(self, token_id: int) -> bytes: ...


class ByteTokenizer:
    """UTF-8 bytes as tokens 0..255, then specials and the spatial bins (module constants).

    Ids at or past ``vocab_size`` (a model's vocab may be padded larger) and all
    special/bin tokens decode to nothing.
    """

    NUM_BYTES = NUM_BYTES
    PAD_ID = PAD_ID
    BOS_ID = BOS_ID
    EOS_ID = EOS_ID
    COORD_BASE = COORD_BASE
    NUM_COORD_BINS = NUM_COORD_BINS
    SIZE_BASE = SIZE_BASE
    NUM_SIZE_BINS = NUM_SIZE_BINS

    def __init__(self) -> None:
        self.vocab_size = BYTE_VOCAB_SIZE
        self.eos_token_ids: tuple[int, ...] = (EOS_ID,)
        self.bos_token_id: int | None = BOS_ID
        self.pad_token_id = PAD_ID

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """UTF-8 bytes; with ``add_special_tokens`` (a prompt), BOS first."""
        ids = list(text.encode("utf-8"))
        return [BOS_ID, *ids] if add_special_tokens else ids

    def token_bytes(self, token_id: int) -> bytes:
        return bytes((token_id,)) if 0 <= token_id < NUM_BYTES else b""

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return bytes(i for i in ids if 0 <= i < NUM_BYTES)

    def decode(self, ids: Iterable[int]) -> str:
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_name(self, token_id: int) -> str:
        """A readable name for any id (for logs and traces, not for text)."""
        if 0 <= token_id < NUM_BYTES:
            return repr(bytes((token_id,)))[2:-1]
        if token_id == PAD_ID:
            return "<pad>"
        if token_id == BOS_ID:
            return "<bos>"
        if token_id == EOS_ID:
            return "<eos>"
        if COORD_BASE <= token_id < SIZE_BASE:
            return f"<coord_{token_id - COORD_BASE}>"
        if SIZE_BASE <= token_id < BYTE_VOCAB_SIZE:
            return f"<size_{token_id - SIZE_BASE}>"
        return f"<unused_{token_id}>"


class IncrementalDetokenizer:
    """Streams text from tokens, holding back a UTF-8 sequence until it is complete."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, ids: Iterable[int]) -> str:
        """Text completed by these tokens (may be empty)."""
        data = b"".join(self._tokenizer.token_bytes(i) for i in ids)
        return self._decoder.decode(data)

    def flush(self) -> str:
        """Whatever is held back, incomplete sequences as replacement characters."""
        return self._decoder.decode(b"", final=True)


def byte_level_alphabet() -> dict[str, int]:
    """The printable stand-in character of each byte in byte-level BPE vocabularies.

    Printable Latin-1 bytes stand for themselves; the others (control bytes,
    space, DEL, NBSP, soft hyphen) are shifted to code points from 256 up in
    byte order, so every byte has a visible, unambiguous character.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table: dict[str, int] = {chr(b): b for b in printable}
    shifted = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + shifted)] = b
            shifted += 1
    return table


# The special-token names transformers passes to a chat template (its special_tokens_map).
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` through the ``tokenizers`` library, with the rules of
    the folder's ``tokenizer_config.json`` applied as transformers applies them.

    ``encode(text, add_special_tokens=True)`` equals ``AutoTokenizer(folder)(text).input_ids``:
    the tokenizer.json post-processor adds what the tokenizer adds (Llama 3's
    ``<|begin_of_text|>``, nothing for Qwen), and where tokenizer_config.json sets
    ``add_bos_token``/``add_eos_token`` those flags decide instead, as transformers then
    rebuilds the post-processor from them.
    """

    def __init__(self, path: str | Path, eos_token_ids: Iterable[int] = (),
                 tokenizer_config: Mapping[str, Any] | None = None, chat_template: str | None = None) -> None:
        from tokenizers import Tokenizer as _Tokenizer

        path = Path(path)
        self._tok = _Tokenizer.from_file(str(path))
        spec = json.loads(path.read_text(encoding="utf-8"))
        cfg = dict(tokenizer_config or {})
        self.vocab_size: int = self._tok.get_vocab_size(with_added_tokens=True)
        self.eos_token_ids: tuple[int, ...] = tuple(eos_token_ids)
        # the strings a chat template sees as bos_token, eos_token, ...
        self.special_tokens: dict[str, str] = {}
        for name in SPECIAL_TOKEN_NAMES:
            text = _token_text(cfg.get(name))
            if text is not None:
                self.special_tokens[name] = text
        bos = self.special_tokens.get("bos_token")
        self.bos_token_id: int | None = self._tok.token_to_id(bos) if bos is not None else None
        if "add_bos_token" in cfg or "add_eos_token" in cfg:
            self._tok.post_processor = self._template_processor(bool(cfg.get("add_bos_token")),
                                                                bool(cfg.get("add_eos_token")))
        self.chat_template: str | None = chat_template or _default_template(cfg.get("chat_template"))
        self._special = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
        self._byte_level = "ByteLevel" in json.dumps(spec.get("decoder") or {})
        self._bytes: list[bytes] | None = None

    @classmethod
    def from_folder(cls, folder: str | Path, eos_token_ids: Iterable[int] = ()) -> HFTokenizer:
        """The tokenizer of a model folder: ``tokenizer.json``, ``tokenizer_config.json`` if any,
        and the chat template of ``chat_template.jinja`` (which wins, as in transformers) or of
        the config. Raises OSError/ValueError for unreadable files."""
        folder = Path(folder)
        cfg_path, jinja = folder / "tokenizer_config.json", folder / "chat_template.jinja"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
        if not isinstance(cfg, dict):
            raise ValueError(f"{cfg_path} does not hold a JSON object")
        template = jinja.read_text(encoding="utf-8") if jinja.is_file() else None
        return cls(folder / "tokenizer.json", eos_token_ids, cfg, template)

    def _template_processor(self, add_bos: bool, add_eos: bool):
        """transformers' ``update_post_processor``: [BOS] $A [EOS] by the config's flags (a flag
        whose token the config does not name is dropped, as there)."""
        from tokenizers import processors

        bos, eos = self.special_tokens.get("bos_token"), self.special_tokens.get("eos_token")
        known = self._tok.token_to_id
        add_bos = add_bos and bos is not None and known(bos) is not None
        add_eos = add_eos and eos is not None and known(eos) is not None
        single = f"{bos + ':0 ' if add_bos else ''}$A:0{' ' + eos + ':0' if add_eos else ''}"
        pair = f"{single}{' ' + bos + ':1' if add_bos else ''} $B:1{' ' + eos + ':1' if add_eos else ''}"
        specials = [(t, known(t)) for t, on in ((bos, add_bos), (eos, add_eos)) if on]
        return processors.TemplateProcessing(single=single, pair=pair, special_tokens=specials)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``; with ``add_special_tokens`` (a prompt), the tokenizer's own
        additions (BOS and the like) as AutoTokenizer makes them."""
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode([i for i in ids if 0 <= i < self.vocab_size], skip_special_tokens=True)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.token_bytes(i) for i in ids)

    def token_name(self, token_id: int) -> str:
        """The vocabulary's name for an id (special tokens included; for logs and logprobs)."""
        piece = self._tok.id_to_token(token_id) if 0 <= token_id < self.vocab_size else None
        return piece if piece is not None else f"<unused_{token_id}>"

    def token_bytes(self, token_id: int) -> bytes:
        if self._bytes is None:
            self._bytes = self._build_byte_table()
        return self._bytes[token_id] if 0 <= token_id < len(self._bytes) else b""

    def _build_byte_table(self) -> list[bytes]:
        alphabet = byte_level_alphabet() if self._byte_level else None
        table: list[bytes] = []
        for i in range(self.vocab_size):
            piece = self._tok.id_to_token(i)
            if piece is None or i in self._special:
                table.append(b"")
            elif alphabet is not None and all(c in alphabet for c in piece):
                table.append(bytes(alphabet[c] for c in piece))
            elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                table.append(bytes((int(piece[3:5], 16),)))  # SentencePiece byte fallback
            else:
                table.append(piece.replace("\u2581", " ").encode("utf-8"))  # SentencePiece "▁" is a space
        return table


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _default_template(value: Any) -> str | None:
    """tokenizer_config.json's ``chat_template``: a string, or a list of named templates of
    which transformers uses "default"."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        template = named.get("default")
        return template if isinstance(template, str) else None
    return None
