"""Built-in presets: deterministic, diverse under greedy decoding, all dtypes run; config figures; CLI."""
from __future__ import annotations

import pytest
import torch

from photon_trace.cli import main
from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.kv_pool import KVPool
from photon_trace.engine.model.loader import ModelSpec, load_model
from photon_trace.engine.model.presets import PRESETS
from helpers.reference_generate import generate
from photon_trace.engine.model.batch import make_forward_batch


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny")


def test_preset_weights_are_deterministic_from_the_seed(tiny):
    again = load_model("tiny", seed=0).model.state_dict()
    other = load_model("tiny", seed=1).model.state_dict()
    for name, value in tiny.model.state_dict().items():
        assert torch.equal(value, again[name])
    assert not torch.equal(tiny.model.embed.weight, other["embed.weight"])


def test_greedy_continuations_of_presets_are_diverse(tiny):
    result = generate(tiny.model, tiny.tokenizer, ["Hello", "The quick brown fox", "a"], max_new_tokens=48,
                      stop_on_eos=False)
    for ids in result.token_ids:
        assert len(set(ids)) >= 20, ids


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_forward_is_finite_and_close_to_fp32(tiny, dtype):
    low = load_model("tiny", dtype=dtype).model
    rows = [(list(range(40, 60)), 0, [1, 2]), (list(range(7)), 0, [5]), ([0], 0, [0])]  # last: padding
    batch = make_forward_batch(rows, page_size=16)
    with torch.inference_mode():
        ref = tiny.model(batch, KVPool(tiny.config, 8, 16), all_logits=True)
        out = low(batch, KVPool(tiny.config, 8, 16, dtype=dtype), all_logits=True)
    assert out.dtype == dtype and torch.isfinite(out).all()
    agree = (out.float().argmax(-1) == ref.argmax(-1)).float().mean().item()
    assert agree > 0.8


def test_fp32_logits_buffer_from_a_bf16_model(tiny):
    low = load_model("tiny", dtype="bfloat16").model
    batch = make_forward_batch([([1, 2, 3], 0, [1])], page_size=16)
    out = torch.empty(1, tiny.config.vocab_size, dtype=torch.float32)
    with torch.inference_mode():
        low(batch, KVPool(tiny.config, 2, 16, dtype=torch.bfloat16), out_logits=out)
    assert torch.isfinite(out).all()


def test_config_figures_match_the_instantiated_model(tiny):
    assert tiny.config.param_count == sum(p.numel() for p in tiny.model.parameters())
    assert tiny.model.weight_bytes == tiny.config.weight_bytes(torch.float32)
    c = PRESETS["1.5b"]  # never instantiated on CPU: the figures come from the config alone
    assert 1.7e9 < c.param_count < 1.9e9
    assert c.kv_bytes_per_token(torch.bfloat16) == 2 * 24 * 2048 * 2
    assert c.flops_per_token == 2 * (c.param_count - c.vocab_size * c.hidden_size - 24 * 2 * 2048 - 2048)
    assert 2e6 < PRESETS["tiny"].param_count < 6e6 and 2e7 < PRESETS["small"].param_count < 6e7


def test_config_validation():
    with pytest.raises(ValueError, match="multiple"):
        ModelConfig(vocab_size=10, hidden_size=8, intermediate_size=8, num_layers=1, num_heads=3,
                    num_kv_heads=2, head_dim=4)
    with pytest.raises(ValueError, match="positive"):
        ModelConfig(vocab_size=0, hidden_size=8, intermediate_size=8, num_layers=1, num_heads=2,
                    num_kv_heads=2, head_dim=4)
    with pytest.raises(ValueError, match="eos"):
        ModelConfig(vocab_size=10, hidden_size=8, intermediate_size=8, num_layers=1, num_heads=2,
                    num_kv_heads=2, head_dim=4, eos_token_ids=(10,))


def test_model_spec_is_picklable_and_loads():
    import pickle

    spec = pickle.loads(pickle.dumps(ModelSpec("tiny", dtype="float32", device="cpu")))
    assert spec.load().config is PRESETS["tiny"]


def test_cli_generate_prints_text_and_tokens_per_s(capsys):
    threads = torch.get_num_threads()
    try:
        assert main(["generate", "--model", "tiny", "--max-tokens", "8", "Hello"]) == 0
    finally:
        torch.set_num_threads(threads)  # the command sets one intra-op thread for the process
    captured = capsys.readouterr()
    assert captured.out.startswith("Hello")
    assert "tokens/s" in captured.err
