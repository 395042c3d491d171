"""What the host needs of a model without its weights: config, tokenizer, where the
weights are, and the checkpoint's sampling defaults.

On the host-process device the weights live in the worker only; the scheduler
needs the vocabulary size, context length, EOS ids and the tokenizer. A Hub id
is resolved here, once, so the device loads the same local folder.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from photon_trace.engine.model.checkpoint import generation_defaults, load_tokenizer, read_config
from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.loader import model_folder
from photon_trace.engine.model.presets import PRESETS, preset_config
from photon_trace.engine.model.tokenizer import ByteTokenizer


@dataclass(frozen=True, slots=True)
class HostModel:
    config: ModelConfig
    tokenizer: Any                      # a Tokenizer
    source: str                         # what the device loads: a preset name or a local folder
    sampling_defaults: dict[str, Any] = field(default_factory=dict)  # generation_config.json's


def load_host_side(name_or_path: str) -> HostModel:
    if name_or_path in PRESETS:
        return HostModel(preset_config(name_or_path), ByteTokenizer(), name_or_path)
    folder = model_folder(name_or_path)
    config = read_config(folder)
    return HostModel(config, load_tokenizer(folder, config), str(folder), generation_defaults(folder))
