"""Text and chat prompts encode exactly as transformers' AutoTokenizer encodes them, for the
three tokenizer families real checkpoints use (see helpers/hf_folders.py)."""
from __future__ import annotations

import json

import pytest

transformers = pytest.importorskip("transformers")

from photon_trace.engine.model.chat_template import ChatTemplateError, chat_prompt_ids  # noqa: E402
from photon_trace.engine.model.host_side import load_host_side  # noqa: E402
from helpers.hf_folders import TEXTS, model_folder, tokenizer_folder  # noqa: E402

KINDS = ("llama3", "qwen2", "mistral")

CHATS = [
    [{"role": "user", "content": "Hello there!"}],
    [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Émile 🥞?"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " Hello! "},
     {"role": "user", "content": "数学\nand tabs\t?"}],
]


@pytest.fixture(scope="module", params=KINDS)
def folders(request, tmp_path_factory):
    folder = tokenizer_folder(request.param, tmp_path_factory.mktemp(request.param))
    return request.param, folder, transformers.AutoTokenizer.from_pretrained(str(folder))


def test_text_prompts_encode_as_autotokenizer(folders):
    kind, folder, hf = folders
    from photon_trace.engine.model.tokenizer import HFTokenizer

    ours = HFTokenizer.from_folder(folder)
    for text in TEXTS:
        assert ours.encode(text, add_special_tokens=True) == hf(text).input_ids, (kind, text)
        assert ours.encode(text) == hf(text, add_special_tokens=False).input_ids, (kind, text)
    first = ours.encode("Hi", add_special_tokens=True)[0]
    if kind == "qwen2":
        assert first != ours._tok.token_to_id("<|endoftext|>"), "Qwen adds no BOS"
    else:
        assert first == hf.bos_token_id


def test_the_engine_tokenizer_ignores_config_json_bos_for_qwen(tmp_path):
    """Real Qwen2.5 folders name <|endoftext|> as bos_token_id in config.json; no prompt starts with it."""
    folder = model_folder("qwen2", tmp_path / "qwen2")
    bos = json.loads((folder / "config.json").read_text())["bos_token_id"]
    tok = load_host_side(str(folder)).tokenizer
    hf = transformers.AutoTokenizer.from_pretrained(str(folder))
    ids = tok.encode("Hello, world!", add_special_tokens=True)
    assert ids == hf("Hello, world!").input_ids and bos not in ids


def test_chat_prompts_equal_apply_chat_template(folders):
    kind, folder, hf = folders
    from photon_trace.engine.model.tokenizer import HFTokenizer

    ours = HFTokenizer.from_folder(folder)
    assert ours.chat_template, "the folder's own template is found (tokenizer_config.json or chat_template.jinja)"
    for messages in CHATS:
        try:
            expect = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        except Exception as e:   # the template's raise_exception: ours must refuse as well
            with pytest.raises(ChatTemplateError, match="roles"):
                chat_prompt_ids(ours, messages)
            assert kind == "mistral" and "roles" in str(e)
            continue
        assert chat_prompt_ids(ours, messages) == list(expect), (kind, messages)
