"""One way to get a model: ``load_model(name_or_path, dtype, device)``.

Arguments are plain strings (or torch dtypes/devices), so a picklable
:class:`ModelSpec` can carry them to the device worker process, which loads the
same model there.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from photon_trace.engine.model.checkpoint import CheckpointError, load_checkpoint
from photon_trace.engine.model.config import ModelConfig
from photon_trace.engine.model.decoder import DecoderModel
from photon_trace.engine.model.presets import PRESETS, build_preset
from photon_trace.engine.model.tokenizer import ByteTokenizer, Tokenizer

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; one of {', '.join(DTYPES)}") from None


@dataclass(frozen=True, slots=True)
class LoadedModel:
    model: DecoderModel
    tokenizer: Tokenizer
    config: ModelConfig
    name: str


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Picklable description of a model to load (in this process or a worker)."""
    name_or_path: str
    dtype: str = "float32"
    device: str = "cpu"
    seed: int = 0

    def load(self) -> LoadedModel:
        return load_model(self.name_or_path, self.dtype, self.device, self.seed)


def load_model(name_or_path: str, dtype: str | torch.dtype = "float32",
               device: str | torch.device = "cpu", seed: int = 0) -> LoadedModel:
    """A preset (``tiny``, ``small``, ``1.5b``; weights from ``seed``), a Hugging Face folder or
    a Hub id (through huggingface_hub's cache).

    Raises :class:`CheckpointError` for a folder that cannot be loaded and
    ValueError for a name that is neither a preset, a folder nor a Hub id.
    """
    torch_dtype = resolve_dtype(dtype)
    if name_or_path in PRESETS:
        model = build_preset(name_or_path, torch_dtype, device, seed)
        return LoadedModel(model, ByteTokenizer(), model.config, name_or_path)
    path = model_folder(name_or_path)
    model, tokenizer, config = load_checkpoint(path, torch_dtype, device)
    return LoadedModel(model, tokenizer, config, path.name)


def model_folder(name_or_path: str) -> Path:
    """The folder a model name that is not a preset names: a local folder, else a Hub id's
    snapshot (see ``hub.py``). ValueError if it is neither, CheckpointError if it is not a
    folder or the Hub cannot provide it."""
    from photon_trace.engine.model.hub import looks_like_repo_id, snapshot_folder

    path = Path(name_or_path).expanduser()
    if not path.exists() and looks_like_repo_id(name_or_path):
        return snapshot_folder(name_or_path)
    if not path.exists():
        raise ValueError(f"{name_or_path!r} is neither a preset ({', '.join(PRESETS)}), a model folder "
                         f"nor a Hugging Face Hub id (owner/name)")
    if not path.is_dir():
        raise CheckpointError(f"not a model folder: {path}")
    return path
