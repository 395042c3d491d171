"""Hugging Face Hub ids (``Qwen/Qwen2.5-0.5B-Instruct``) as local model folders.

Resolution goes through ``huggingface_hub``'s cache, so its settings apply as
everywhere else: ``HF_HOME`` / ``HF_HUB_CACHE`` say where the cache is,
``HF_HUB_OFFLINE=1`` forbids the network (a cached snapshot is used, a missing
one is an error naming the cache), ``HF_TOKEN`` authenticates. Online, only the
files a model folder needs are downloaded.
"""
from __future__ import annotations

import re
from pathlib import Path

from photon_trace.engine.model.checkpoint import CheckpointError

# What a model folder needs; nothing else of a repository is fetched (no .bin, .gguf, ...).
FOLDER_FILES = ("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
                "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def looks_like_repo_id(name: str) -> bool:
    """``owner/name`` in the Hub's alphabet (a relative path of two parts looks the same:
    callers try the filesystem first)."""
    return bool(_REPO_ID.match(name)) and ".." not in name and not name.endswith((".", "-"))


def snapshot_folder(repo_id: str, revision: str | None = None) -> Path:
    """The local snapshot folder of a Hub model, downloaded when online and not cached."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=list(FOLDER_FILES)))
    except RepositoryNotFoundError:
        raise CheckpointError(f"no model {repo_id!r} on the Hugging Face Hub (or it is private: set HF_TOKEN)") from None
    except LocalEntryNotFoundError:
        where = constants.HF_HUB_CACHE
        why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the Hub could not be reached"
        raise CheckpointError(f"model {repo_id!r} is not in the Hugging Face cache ({where}) and {why}") from None
    except (HfHubHTTPError, OSError) as e:
        raise CheckpointError(f"cannot fetch {repo_id!r} from the Hugging Face Hub: {e}") from None
