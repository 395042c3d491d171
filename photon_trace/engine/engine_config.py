"""Engine settings: one validated dataclass."""
from __future__ import annotations

from dataclasses import dataclass

# Short names users type, as --dtype and in code.
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    model: str = "small"          # preset name (tiny, small, 1.5b), a checkpoint folder or a Hub id
    backend: str = "auto"         # cuda | cpu (host-process device) | auto
    dtype: str = "auto"           # float32 | bfloat16 | float16 (or fp32, bf16, fp16) | auto (bf16 on CUDA, fp32 on CPU)
    depth: int = 2                # 2 = pipelined, 1 = blocking; everything else equal
    mask_upload: str = "async"    # async | sync (the source's bug, kept to show the tooling catches it)
    max_rows: int = 64            # rows (sequences) in one step
    max_step_tokens: int = 256    # flat tokens in one step: decode rows + prefill chunks
    max_seqs: int = 128           # resident sequences (token-table rows)
    page_size: int = 16           # tokens per KV page
    kv_tokens: int = 32768        # KV pool size in tokens (page 0 extra, as scratch)
    max_context: int | None = None  # prompt + generated tokens of one sequence (None: the model's)
    cuda_graphs: bool = True      # capture decode forwards per batch bucket and slot (CUDA only)
    # Intra-op threads of the host-process device (cpu backend). 1: the device and the
    # scheduler get a core each, the split the pipeline is built for. More: the device
    # also uses the host's cores (unpinned, the host sleeps in its waits), which pays when
    # forwards are long and bookkeeping short, as in large offline batches.
    device_threads: int = 1
    # Where unseeded requests' seeds are drawn from. None: from the OS, so runs differ; the
    # engine records the seed it used (Engine.config.seed, the trace header) to replay a run.
    seed: int | None = None
    weights_seed: int = 0         # the presets' random weights
    def __post_init__(self) -> None:
        if self.depth not in (1, 2):
            raise ValueError(f"depth must be 1 (blocking) or 2 (pipelined), got {self.depth}")
        if self.mask_upload not in ("async", "sync"):
            raise ValueError(f"mask_upload must be 'async' or 'sync', got {self.mask_upload!r}")
        if self.backend not in ("auto", "cpu", "cuda"):
            raise ValueError(f"backend must be auto, cpu or cuda, got {self.backend!r}")
        object.__setattr__(self, "dtype", DTYPE_ALIASES.get(self.dtype, self.dtype))
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be auto, float32, bfloat16 or float16 (or fp32, bf16, fp16), "
                             f"got {self.dtype!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not 0 <= self.seed < 2**63):
            raise ValueError(f"seed must be an int in [0, 2**63), got {self.seed!r}")
        for name in ("max_rows", "max_step_tokens", "max_seqs", "page_size", "kv_tokens", "device_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.max_context is not None and self.max_context < 2:
            raise ValueError("max_context must be at least 2")
        if self.max_step_tokens < self.max_rows:
            raise ValueError("max_step_tokens must be >= max_rows (each row needs a token)")

    @property
    def num_pages(self) -> int:
        return self.kv_tokens // self.page_size + 1

    @property
    def max_pages_per_row(self) -> int:
        assert self.max_context is not None, "resolve max_context against the model first"
        return -(-self.max_context // self.page_size)

    def resolved_backend(self) -> str:
        if self.backend != "auto":
            return self.backend
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"

    def resolved_dtype(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "bfloat16" if self.resolved_backend() == "cuda" else "float32"
