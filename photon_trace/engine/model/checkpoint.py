"""Load a Hugging Face model folder (Llama, Mistral, Qwen2, Qwen3) with no network.

Reads ``config.json``, ``model.safetensors`` or a sharded
``model.safetensors.index.json``, ``tokenizer.json`` with ``tokenizer_config.json``
and ``chat_template.jinja``, and the EOS ids and sampling defaults of
``generation_config.json``. Anything wrong is one :class:`CheckpointError` that
names the file or tensor and the problem.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.decoder import DecoderModel
from photon_trace.engine.model.tokenizer import HFTokenizer

SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}
# Buffers some older checkpoints saved; they are recomputed, never loaded.
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


class CheckpointError(Exception):
    """A model folder that cannot be loaded; the message names the file or tensor and why."""


def _read_json(path: Path, required: bool = True) -> dict[str, Any] | None:
    if not path.is_file():
        if required:
            raise CheckpointError(f"missing file: {path}")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"cannot parse {path}: {e}") from e
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} does not hold a JSON object")
    return data


def _eos_ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def read_config(folder: str | Path) -> ModelConfig:
    """ModelConfig from ``config.json`` (+ EOS ids from ``generation_config.json``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"model folder not found: {folder}")
    path = folder / "config.json"
    cfg = _read_json(path)
    archs = cfg.get("architectures") or []
    arch = archs[0] if archs else next(
        (a for a, t in SUPPORTED_ARCHITECTURES.items() if t == cfg.get("model_type")), None)
    if arch not in SUPPORTED_ARCHITECTURES:
        raise CheckpointError(f"{path}: unsupported architecture {arch or cfg.get('model_type')!r}; "
                              f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
    kind = SUPPORTED_ARCHITECTURES[arch]
    try:
        return _config_fields(cfg, arch, kind, folder)
    except (KeyError, TypeError, ValueError) as e:
        detail = f"missing field {e}" if isinstance(e, KeyError) else str(e)
        raise CheckpointError(f"{path}: bad config: {detail}") from e


def _config_fields(cfg: dict[str, Any], arch: str, kind: str, folder: Path) -> ModelConfig:
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {cfg['hidden_act']!r} is not supported (only silu)")
    if cfg.get("mlp_bias", False):
        raise ValueError("mlp_bias=true is not supported")
    num_heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    # Transformers 5 nests RoPE settings in rope_parameters; older configs use rope_theta + rope_scaling.
    rope = cfg.get("rope_parameters") or {}
    rope_theta = float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    scaling = {k: v for k, v in rope.items() if k != "rope_theta"} if rope else cfg.get("rope_scaling")
    if scaling and scaling.get("rope_type", scaling.get("type", "default")) == "default":
        scaling = None
    max_position = int(cfg["max_position_embeddings"])
    window, layers = _sliding_window(cfg, kind)
    attention_bias = bool(cfg.get("attention_bias", False))
    generation = _read_json(folder / "generation_config.json", required=False) or {}
    eos = _eos_ids(generation.get("eos_token_id", cfg.get("eos_token_id")))
    return ModelConfig(
        vocab_size=int(cfg["vocab_size"]),
        hidden_size=hidden,
        intermediate_size=int(cfg["intermediate_size"]),
        num_layers=int(cfg["num_hidden_layers"]),
        num_heads=num_heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or num_heads),
        head_dim=int(cfg.get("head_dim") or hidden // num_heads),
        rope_theta=rope_theta,
        rope_scaling=scaling,
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=kind == "qwen2" or attention_bias,  # Qwen2 always has q/k/v bias
        o_bias=kind != "qwen2" and attention_bias,   # Llama/Qwen3's attention_bias also covers o_proj
        qk_norm=kind == "qwen3",
        max_position=max_position,
        sliding_window=window,
        sliding_layers=layers,
        eos_token_ids=eos,
        architecture=arch,
    )


def _sliding_window(cfg: dict[str, Any], kind: str) -> tuple[int | None, tuple[int, ...]]:
    """(window, the layers using it) as transformers reads the config: Mistral windows every
    layer when ``sliding_window`` is set; Qwen2/Qwen3 only with ``use_sliding_window``, on the
    layers from ``max_window_layers`` up (default 28); an explicit ``layer_types`` decides."""
    n = int(cfg["num_hidden_layers"])
    window = cfg.get("sliding_window")
    if kind in ("qwen2", "qwen3") and not cfg.get("use_sliding_window", False):
        window = None
    if kind == "llama" or window is None:
        return None, ()
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == n:
        layers = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    elif kind == "mistral":
        layers = tuple(range(n))
    else:
        first = int(cfg.get("max_window_layers", 28))
        layers = tuple(range(first, n))
    return (int(window), layers) if layers else (None, ())


def generation_defaults(folder: str | Path) -> dict[str, Any]:
    """Sampling defaults of ``generation_config.json`` (temperature, top_p, top_k, min_p), which apply
    to requests that do not set them, as in vLLM; {} without the file."""
    gen = _read_json(Path(folder) / "generation_config.json", required=False) or {}
    out: dict[str, Any] = {}
    for key, kind in (("temperature", float), ("top_p", float), ("top_k", int), ("min_p", float)):
        value = gen.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = kind(value)
    return out


@dataclass(frozen=True, slots=True)
class _Target:
    module: str                    # our module's path in DecoderModel
    attr: str                      # "weight" (the (out, in) view for Linear) or "bias"
    rows: tuple[int, int] | None   # row range inside a fused q/k/v or gate/up weight; None: all


def weight_map(config: ModelConfig) -> dict[str, _Target]:
    """Hugging Face tensor name -> where it goes in DecoderModel (q/k/v and gate/up are fused)."""
    c = config
    q, kv, inter = c.q_size, c.kv_size, c.intermediate_size
    out = {"model.embed_tokens.weight": _Target("embed", "weight", None),
           "model.norm.weight": _Target("norm", "weight", None)}
    if not c.tie_embeddings:
        out["lm_head.weight"] = _Target("lm_head", "weight", None)
    for i in range(c.num_layers):
        hf, ours = f"model.layers.{i}.", f"layers.{i}."
        out[hf + "input_layernorm.weight"] = _Target(ours + "input_norm", "weight", None)
        out[hf + "post_attention_layernorm.weight"] = _Target(ours + "post_attn_norm", "weight", None)
        for attr in ("weight", "bias") if c.qkv_bias else ("weight",):
            out[hf + f"self_attn.q_proj.{attr}"] = _Target(ours + "attn.qkv", attr, (0, q))
            out[hf + f"self_attn.k_proj.{attr}"] = _Target(ours + "attn.qkv", attr, (q, q + kv))
            out[hf + f"self_attn.v_proj.{attr}"] = _Target(ours + "attn.qkv", attr, (q + kv, q + 2 * kv))
        for attr in ("weight", "bias") if c.o_bias else ("weight",):
            out[hf + f"self_attn.o_proj.{attr}"] = _Target(ours + "attn.o_proj", attr, None)
        if c.qk_norm:
            out[hf + "self_attn.q_norm.weight"] = _Target(ours + "attn.q_norm", "weight", None)
            out[hf + "self_attn.k_norm.weight"] = _Target(ours + "attn.k_norm", "weight", None)
        out[hf + "mlp.gate_proj.weight"] = _Target(ours + "mlp.gate_up", "weight", (0, inter))
        out[hf + "mlp.up_proj.weight"] = _Target(ours + "mlp.gate_up", "weight", (inter, 2 * inter))
        out[hf + "mlp.down_proj.weight"] = _Target(ours + "mlp.down", "weight", None)
    return out


def _tensor_files(folder: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it."""
    from safetensors import safe_open

    single, index = folder / "model.safetensors", folder / "model.safetensors.index.json"
    if index.is_file():
        shards = _read_json(index).get("weight_map")
        if not isinstance(shards, dict):
            raise CheckpointError(f"{index}: no 'weight_map' object")
        files = {name: folder / file for name, file in shards.items()}
        for file in sorted(set(files.values())):
            if not file.is_file():
                raise CheckpointError(f"missing file: {file} (listed in {index.name})")
        return files
    if single.is_file():
        try:
            with safe_open(str(single), framework="pt") as f:
                return {name: single for name in f.keys()}
        except Exception as e:  # safetensors raises its own error types for corrupt headers
            raise CheckpointError(f"cannot read {single}: {e}") from e
    raise CheckpointError(f"missing file: {single} (nor a sharded {index.name}) in {folder}")


def load_weights(model: DecoderModel, folder: str | Path) -> None:
    """Fill ``model``'s parameters from the folder's safetensors, checking names and shapes first."""
    from safetensors import safe_open

    folder = Path(folder)
    files = _tensor_files(folder)
    expected = weight_map(model.config)
    tied_extra = {"lm_head.weight"} if model.config.tie_embeddings else set()
    unexpected = sorted(n for n in files if n not in expected and n not in tied_extra
                        and not n.endswith(IGNORED_SUFFIXES))
    if unexpected:
        raise CheckpointError(f"unexpected tensor(s) in {folder}: {', '.join(unexpected[:5])}"
                              + (f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else ""))
    missing = sorted(n for n in expected if n not in files)
    if missing:
        raise CheckpointError(f"missing tensor(s) in {folder}: {', '.join(missing[:5])}"
                              + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    by_file: dict[Path, list[str]] = {}
    for name in expected:
        by_file.setdefault(files[name], []).append(name)
    for file, names in by_file.items():
        with safe_open(str(file), framework="pt") as f:
            for name in names:
                target = expected[name]
                dest = getattr(model.get_submodule(target.module), target.attr)
                if target.rows is not None:
                    dest = dest[target.rows[0]: target.rows[1]]
                shape = tuple(f.get_slice(name).get_shape())
                if shape != tuple(dest.shape):
                    raise CheckpointError(f"tensor {name} in {file.name} has shape {list(shape)}, "
                                          f"expected {list(dest.shape)} from config.json")
                dest.copy_(f.get_tensor(name))


def load_tokenizer(folder: str | Path, config: ModelConfig) -> HFTokenizer:
    """The tokenizer of a Hugging Face model folder (``tokenizer.json`` and its config)."""
    folder = Path(folder)
    tokenizer_path = folder / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise CheckpointError(f"missing file: {tokenizer_path}")
    try:
        return HFTokenizer.from_folder(folder, config.eos_token_ids)
    except Exception as e:  # the tokenizers library raises plain Exceptions on bad files
        raise CheckpointError(f"cannot load the tokenizer in {folder}: {e}") from e


def load_checkpoint(folder: str | Path, dtype: torch.dtype = torch.float32,
                    device: torch.device | str = "cpu") -> tuple[DecoderModel, HFTokenizer, ModelConfig]:
    """Model, tokenizer and config of a Hugging Face model folder."""
    folder = Path(folder)
    config = read_config(folder)
    tokenizer = load_tokenizer(folder, config)
    model = DecoderModel(config, dtype=dtype, device=device)
    with torch.no_grad():
        load_weights(model, folder)
    return model, tokenizer, config
