"""Model folders as real checkpoints ship them, built offline in a second or two.

Three tokenizer families, each trained here on a small corpus and written the way
its checkpoints are written (``tokenizer.json`` plus a hand-written
``tokenizer_config.json`` mirroring the real file's fields):

- ``llama3``: byte-level BPE behind Llama 3's split regex; the tokenizer.json
  post-processor adds ``<|begin_of_text|>``; the chat template sits in tokenizer_config.json.
- ``qwen2``: byte-level BPE with NFC and Qwen's regex; no BOS at all, while
  config.json's ``bos_token_id`` names ``<|endoftext|>`` (as in real Qwen2.5
  folders); a ChatML template in ``chat_template.jinja`` (transformers 5's layout).
- ``mistral``: SentencePiece-style BPE (``▁`` for spaces, ``<0xAB>`` byte fallback);
  ``add_bos_token: true`` in tokenizer_config.json; Mistral's template, which
  refuses a system message with ``raise_exception``.

``model_folder`` adds random weights of a matching transformers model (Llama,
Qwen2, Mistral with a small sliding window) whose vocabulary covers the tokenizer.
"""
from __future__ import annotations

import json
from pathlib import Path

CORPUS = [
    "The quick brown fox jumps over the lazy dog. Hello, world! How are you today?",
    "Émile a mangé 3 crêpes à Paris, puis 12 autres.",
    "def add(x, y):\n    return x + y  # the sum\n",
    "数学 and 物理 are fun, 123 + 456 = 579.",
    "user: hi there\nassistant: hello, what can I do for you?",
    "   leading spaces, tabs\tand\nnew lines\n\n",
] * 8

# Text the tests encode: the corpus' kind, and what it never saw (emoji, other scripts).
TEXTS = ["Hello, world!", " leading space", "Émile mange 3 crêpes", "数学 🥞🥞 ok", "line\n\nbreaks\ttab",
         "<|im_start|> not special?", "x" * 40, "ünïcödé 😀 mixed 123456789"]

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

QWEN2_TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")

SPECIALS = {
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "mistral": ["<unk>", "<s>", "</s>"],
}


def _added_tokens_decoder(tok, specials) -> dict:
    return {str(tok.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                      "single_word": False, "special": True} for t in specials}


def _byte_level(regex: str, specials: list[str], nfc: bool):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=[], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(specials)       # after the learned vocabulary, as in real checkpoints
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def write_llama3(folder: Path) -> None:
    from tokenizers import processors

    tok = _byte_level(LLAMA3_REGEX, SPECIALS["llama3"], nfc=False)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A:0",
                                      pair="<|begin_of_text|> $A:0 <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    tok.save(str(folder / "tokenizer.json"))
    _write_json(folder / "tokenizer_config.json", {
        "added_tokens_decoder": _added_tokens_decoder(tok, SPECIALS["llama3"]),
        "bos_token": "<|begin_of_text|>", "chat_template": LLAMA3_TEMPLATE, "clean_up_tokenization_spaces": True,
        "eos_token": "<|eot_id|>", "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"})


def write_qwen2(folder: Path) -> None:
    tok = _byte_level(QWEN2_REGEX, SPECIALS["qwen2"], nfc=True)
    tok.save(str(folder / "tokenizer.json"))
    _write_json(folder / "tokenizer_config.json", {
        "add_prefix_space": False, "added_tokens_decoder": _added_tokens_decoder(tok, SPECIALS["qwen2"]),
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "bos_token": None,
        "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": 131072, "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None})
    (folder / "chat_template.jinja").write_text(QWEN2_TEMPLATE, encoding="utf-8")


def write_mistral(folder: Path) -> None:
    """SentencePiece-style BPE as transformers' LlamaTokenizer builds it: Metaspace (prepend
    "first", no split), byte fallback, fused unknowns; <s> added by add_bos_token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    meta = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    learner = Tokenizer(models.BPE())
    learner.pre_tokenizer = meta
    learner.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=500, show_progress=False))
    learned = json.loads(learner.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
    for piece in sorted(learned["vocab"], key=learned["vocab"].get):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = None
    tok.pre_tokenizer = meta
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(SPECIALS["mistral"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A:0", pair="<s> $A:0 <s> $B:1",
                                                       special_tokens=[("<s>", 1)])
    tok.save(str(folder / "tokenizer.json"))
    _write_json(folder / "tokenizer_config.json", {
        "add_bos_token": True, "add_eos_token": False,
        "added_tokens_decoder": _added_tokens_decoder(tok, SPECIALS["mistral"]),
        "bos_token": "<s>", "chat_template": MISTRAL_TEMPLATE, "clean_up_tokenization_spaces": False,
        "eos_token": "</s>", "legacy": False, "model_max_length": 32768, "pad_token": None,
        "sp_model_kwargs": {}, "spaces_between_special_tokens": False, "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>", "use_default_system_prompt": False})


WRITERS = {"llama3": write_llama3, "qwen2": write_qwen2, "mistral": write_mistral}
ARCH = {"llama3": "llama", "qwen2": "qwen2", "mistral": "mistral"}
WINDOW = 8   # Mistral's sliding window in these folders: far below prompt + 64 generated tokens


def tokenizer_folder(kind: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    WRITERS[kind](folder)
    return folder


def model_folder(kind: str, folder: Path, seed: int = 1234) -> Path:
    """A tokenizer folder plus random weights of a matching transformers model, saved with
    save_pretrained; EOS/BOS ids set as the real checkpoints set them."""
    import torch
    import transformers
    from tokenizers import Tokenizer

    tokenizer_folder(kind, folder)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    n = tok.get_vocab_size(with_added_tokens=True)
    common = dict(vocab_size=n + 8, hidden_size=64, intermediate_size=160, num_hidden_layers=2,   # padded vocab
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5,
                  initializer_range=0.15, pad_token_id=None)
    if kind == "llama3":
        cfg = transformers.LlamaConfig(**common, bos_token_id=tok.token_to_id("<|begin_of_text|>"),
                                       eos_token_id=tok.token_to_id("<|eot_id|>"), tie_word_embeddings=False)
        model = transformers.LlamaForCausalLM(cfg)
    elif kind == "qwen2":   # Qwen's config.json names <|endoftext|> as BOS; its tokenizer never adds it
        end = tok.token_to_id("<|endoftext|>")
        cfg = transformers.Qwen2Config(**common, bos_token_id=end, eos_token_id=tok.token_to_id("<|im_end|>"),
                                       tie_word_embeddings=True)
        model = transformers.Qwen2ForCausalLM(cfg)
    else:
        cfg = transformers.MistralConfig(**common, bos_token_id=1, eos_token_id=2, sliding_window=WINDOW,
                                         tie_word_embeddings=False)
        model = transformers.MistralForCausalLM(cfg)
    torch.manual_seed(seed)
    model = type(model)(cfg).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
    model.save_pretrained(folder)
    return folder


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False), encoding="utf-8")
