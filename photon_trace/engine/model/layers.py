"""The small building blocks of a Llama-family block: Linear, RMSNorm and the SwiGLU MLP."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Linear(nn.Module):
    """y = x @ weight_t (+ bias), the weight stored input-major (in, out).

    On CPU a single-token GEMV streams an (in, out) matrix at about twice the
    bandwidth of the (out, in) layout (measured: ~20 vs ~10 GB/s on one core);
    batched GEMMs are as fast either way. ``weight`` is the (out, in) view that
    checkpoints use.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool, dtype: torch.dtype,
                 device: torch.device | str) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight_t = nn.Parameter(torch.empty(in_features, out_features, dtype=dtype, device=device),
                                     requires_grad=False)
        self.bias = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device),
                                 requires_grad=False) if bias else None

    @property
    def weight(self) -> torch.Tensor:
        return self.weight_t.t()  # (out, in) view

    def forward(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        if self.bias is None:
            return torch.mm(x, self.weight_t, out=out)
        return torch.addmm(self.bias, x, self.weight_t, out=out)


class RMSNorm(nn.Module):
    """x / rms(x) * weight, with the statistics taken in fp32 whatever the model dtype."""

    def __init__(self, dim: int, eps: float, dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype, device=device), requires_grad=False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        # Normalise in fp32, round to the model dtype, then scale (as the checkpoints were trained).
        return F.rms_norm(x.float(), self.weight.shape, None, self.eps).to(x.dtype) * self.weight


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)), with gate and up fused into one matmul."""

    def __init__(self, hidden: int, intermediate: int, dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        self.intermediate = intermediate
        # Rows [0, I) are gate_proj, rows [I, 2I) up_proj.
        self.gate_up = Linear(hidden, 2 * intermediate, bias=False, dtype=dtype, device=device)
        self.down = Linear(intermediate, hidden, bias=False, dtype=dtype, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).split(self.intermediate, dim=-1)  # (T, I) each
        return self.down(F.silu(gate) * up)
