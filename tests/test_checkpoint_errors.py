"""Bad model folders and prompts give one clear error naming the problem.

Checkpoints are written directly with safetensors (names and shapes as Hugging
Face saves them), so these tests do not need transformers.
"""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from photon_trace.engine.model.checkpoint import CheckpointError, read_config, weight_map
from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.loader import load_model
from photon_trace.engine.model.decoder import DecoderModel
from helpers.reference_generate import check_prompt_length, generate

HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 300, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
    "tie_word_embeddings": False, "hidden_act": "silu", "eos_token_id": 2, "bos_token_id": 1,
}


def hf_tensors(config: ModelConfig) -> dict[str, torch.Tensor]:
    """Random tensors under Hugging Face names, shaped as our model expects them."""
    model = DecoderModel(config)
    gen = torch.Generator().manual_seed(0)
    out = {}
    for name, target in weight_map(config).items():
        dest = getattr(model.get_submodule(target.module), target.attr)
        if target.rows is not None:
            dest = dest[target.rows[0]: target.rows[1]]
        out[name] = torch.randn(dest.shape, generator=gen) * 0.2
    return out


def write_folder(folder, config_json: dict, tensors: dict[str, torch.Tensor] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config_json))
    if tensors is None:
        tensors = hf_tensors(read_config(folder))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 7]}))
    from tokenizers import Tokenizer, models, pre_tokenizers
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.save(str(folder / "tokenizer.json"))


@pytest.fixture()
def good(tmp_path):
    folder = tmp_path / "model"
    write_folder(folder, HF_CONFIG)
    return folder


def test_good_folder_loads_with_eos_from_generation_config(good):
    loaded = load_model(str(good))
    assert loaded.config.eos_token_ids == (2, 7)
    assert loaded.config.max_position == 64 and loaded.config.head_dim == 8
    result = generate(loaded.model, loaded.tokenizer, [[1, 5, 9]], max_new_tokens=4, stop_on_eos=False)
    assert len(result.token_ids[0]) == 4


def test_missing_folder(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        read_config(tmp_path / "nope")
    with pytest.raises(ValueError, match="neither a preset"):
        load_model(str(tmp_path / "nope"))


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json"])
def test_missing_file(good, name):
    (good / name).unlink()
    with pytest.raises(CheckpointError, match=f"missing file.*{name}"):
        load_model(str(good))


def test_missing_shard(good):
    tensors = load_file(str(good / "model.safetensors"))
    (good / "model.safetensors").unlink()
    names = sorted(tensors)
    save_file({n: tensors[n] for n in names[:5]}, str(good / "model-00001-of-00002.safetensors"))
    index = {"weight_map": {n: ("model-00001-of-00002.safetensors" if i < 5 else "model-00002-of-00002.safetensors")
                            for i, n in enumerate(names)}}
    (good / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="missing file.*model-00002-of-00002"):
        load_model(str(good))


def test_unsupported_architecture(tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**HF_CONFIG, "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(CheckpointError, match="unsupported architecture 'GPT2LMHeadModel'"):
        load_model(str(folder))


@pytest.mark.parametrize("change, message", [
    ({"hidden_size": None}, "hidden_size"),
    ({"num_key_value_heads": 3}, "multiple of num_kv_heads"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "unsupported rope_scaling"),
])
def test_bad_config(tmp_path, change, message):
    folder = tmp_path / "bad"
    folder.mkdir()
    cfg = {k: v for k, v in {**HF_CONFIG, **change}.items() if v is not None or k == "rope_scaling"}
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=f"bad config.*{message}"):
        read_config(folder)


def test_wrong_tensor_shape(good):
    tensors = load_file(str(good / "model.safetensors"))
    tensors["model.layers.1.mlp.up_proj.weight"] = torch.zeros(65, 32)
    save_file(tensors, str(good / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model.layers.1.mlp.up_proj.weight.*shape \[65, 32\].*\[64, 32\]"):
        load_model(str(good))


def test_missing_and_unexpected_tensors(good):
    tensors = load_file(str(good / "model.safetensors"))
    del tensors["model.layers.0.self_attn.k_proj.weight"]
    save_file(tensors, str(good / "model.safetensors"))
    with pytest.raises(CheckpointError, match="missing tensor.*layers.0.self_attn.k_proj.weight"):
        load_model(str(good))
    tensors["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(16, 32)
    tensors["model.layers.0.self_attn.k_proj.bias"] = torch.zeros(16)
    save_file(tensors, str(good / "model.safetensors"))
    with pytest.raises(CheckpointError, match="unexpected tensor.*k_proj.bias"):
        load_model(str(good))


def test_rotary_buffers_and_v5_rope_parameters_are_accepted(tmp_path):
    folder = tmp_path / "v5"
    cfg = {k: v for k, v in HF_CONFIG.items() if k not in ("rope_theta", "rope_scaling")}
    cfg["rope_parameters"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}
    write_folder(folder, cfg)
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)
    save_file(tensors, str(folder / "model.safetensors"))
    config = load_model(str(folder)).config
    assert config.rope_theta == 500.0 and config.rope_type == "linear"


def test_sliding_windows_are_read_as_transformers_reads_them(tmp_path):
    """Mistral windows every layer and keeps its full context (attention applies the window);
    Qwen2 only with use_sliding_window, on the layers from max_window_layers up."""
    folder = tmp_path / "mistral"
    write_folder(folder, {**HF_CONFIG, "architectures": ["MistralForCausalLM"], "model_type": "mistral",
                          "sliding_window": 32})
    config = load_model(str(folder)).config
    assert (config.max_position, config.sliding_window, config.sliding_layers) == (64, 32, (0, 1))
    qwen = {**HF_CONFIG, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "sliding_window": 16}
    write_folder(tmp_path / "q_off", qwen)
    assert read_config(tmp_path / "q_off").sliding_window is None       # use_sliding_window absent
    write_folder(tmp_path / "q_on", {**qwen, "use_sliding_window": True, "max_window_layers": 1})
    config = read_config(tmp_path / "q_on")
    assert (config.sliding_window, config.sliding_layers) == (16, (1,))


def test_prompt_longer_than_context(good):
    loaded = load_model(str(good))
    with pytest.raises(ValueError, match="does not fit the model's context of 64"):
        generate(loaded.model, loaded.tokenizer, [[5] * 64], max_new_tokens=4)
    check_prompt_length(63, 64)
    with pytest.raises(ValueError, match="empty prompt"):
        check_prompt_length(0, 64)


def test_tied_checkpoint_may_carry_a_redundant_lm_head(tmp_path):
    folder = tmp_path / "tied"
    cfg = {**HF_CONFIG, "tie_word_embeddings": True}
    write_folder(folder, cfg)
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
    save_file(tensors, str(folder / "model.safetensors"))
    loaded = load_model(str(folder))
    assert loaded.model.lm_head is None
    shutil.rmtree(folder)
