"""What the host needs of a model without its weights: config and tokenizer.

On the host-process device the weights live in the worker only; the scheduler
needs the vocabulary size, context length, EOS ids and the tokenizer.
"""
from __future__ import annotations

from pathlib import Path

from photon_trace.engine.model.checkpoint import CheckpointError, read_config
from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.presets import PRESETS, preset_config
from photon_trace.engine.model.tokenizer import ByteTokenizer, HFTokenizer


def load_host_side(name_or_path: str) -> tuple[ModelConfig, object]:
    if name_or_path in PRESETS:
        return preset_config(name_or_path), ByteTokenizer()
    folder = Path(name_or_path).expanduser()
    if not folder.is_dir():
        raise ValueError(f"{name_or_path!r} is neither a preset ({', '.join(PRESETS)}) nor a model folder")
    config = read_config(folder)
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise CheckpointError(f"missing file: {path}")
    import json
    bos = json.loads((folder / "config.json").read_text()).get("bos_token_id")
    try:
        return config, HFTokenizer(path, config.eos_token_ids, bos)
    except Exception as e:  # the tokenizers library raises plain Exceptions on bad files
        raise CheckpointError(f"cannot load {path}: {e}") from e
