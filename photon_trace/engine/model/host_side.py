"""What the host needs of a model without its weights: config and tokenizer.

On the host-process device the weights live in the worker only; the scheduler
needs the vocabulary size, context length, EOS ids and the tokenizer.
"""
from __future__ import annotations

from photon_trace.engine.model.checkpoint import load_tokenizer, read_config
from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.loader import model_folder
from photon_trace.engine.model.presets import PRESETS, preset_config
from photon_trace.engine.model.tokenizer import ByteTokenizer


def load_host_side(name_or_path: str) -> tuple[ModelConfig, object]:
    if name_or_path in PRESETS:
        return preset_config(name_or_path), ByteTokenizer()
    folder = model_folder(name_or_path)
    config = read_config(folder)
    return config, load_tokenizer(folder, config)
