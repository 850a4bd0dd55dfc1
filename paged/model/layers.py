"""The leaf layers TinyLlama is built from: Linear and Embedding (called directly), linears fused
side by side for one matmul, and RMSNorm.

Same parameters and math as torch's nn.Linear / nn.Embedding and transformers' LlamaRMSNorm; what
differs is the inference layout (column-major weights, q/k/v and gate/up as views of one fused
weight) and, in CPU float32 inference, RMSNorm (with the residual add before it) as one C loop
(paged/kernels/native_ops.py). Shapes as in llama.py's legend.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from paged.kernels import native_ops
from paged.model.direct import Direct


class Linear(Direct, nn.Linear):
    """nn.Linear (same parameters, same math), called directly; column_major_ re-lays its weight."""

    def column_major_(self) -> None:
        """Store weight [out, in] column-major: its memory then holds weight.T [in, out] row by row.

        The shape stays transformers' (what state_dict and checkpoints see). F.linear computes
        x @ weight.T, then a plain row-major matrix for the matrix library: on this model's small
        matmuls (1-32 rows) 15-40% faster than the transposed case (measured, 1 thread). Same
        products; for a single row the library may add them in another order (a few ulps apart).
        """
        if self.weight.is_meta or self.weight.t().is_contiguous():
            return
        # same Parameter object: an optimizer keeps it
        self.weight.data = self.weight.data.t().contiguous().t()


class Embedding(Direct, nn.Embedding):
    """nn.Embedding (same parameters, same math), called directly."""


# (weight, bias or None) of linears laid side by side
Fused = tuple[torch.Tensor, torch.Tensor | None]


def fuse_linears(projs: tuple[Linear, ...]) -> tuple[Fused | None, tuple[int, ...]]:
    """Lay linears reading the same input side by side -> ((weight [sum outs, in], bias), ptrs).

    Weights (and biases) are concatenated column-major (see Linear.column_major_), each parameter
    then a view of its part: same parameters, names and values, and an optimizer step or a
    load_state_dict copy writes through the views. ptrs: the parameters' data pointers.
    (None, ()) on meta.
    """
    if any(p.weight.is_meta for p in projs):
        return None, ()
    weight = torch.cat([p.weight.detach().t() for p in projs], dim=1).contiguous().t()
    bias = torch.cat([p.bias.detach() for p in projs]) if projs[0].bias is not None else None
    sizes = [p.out_features for p in projs]
    for i, (p, part) in enumerate(zip(projs, weight.split(sizes))):
        p.weight.data = part
        if bias is not None:
            p.bias.data = bias.split(sizes)[i]
    return (weight, bias), linear_ptrs(projs)


def linear_ptrs(projs: tuple[Linear, ...]) -> tuple[int, ...]:
    """The data pointers of the linears' weights and biases (fused_linear's staleness check)."""
    return tuple(t.data_ptr() for p in projs for t in (p.weight, p.bias) if t is not None)


def fused_linear(x: torch.Tensor, projs: tuple[Linear, ...], fused: Fused | None,
                 ptrs: tuple[int, ...]) -> torch.Tensor:
    """x [..., in] -> every proj's output side by side [..., sum of outs].

    One matmul with the fused weight when no gradient is needed and the parameters are still its
    views; otherwise (training, or a parameter replaced since: model.to(),
    load_state_dict(assign=True)) with their concatenation, so a stale fused tensor is never read.
    """
    if not torch.is_grad_enabled() and fused is not None and linear_ptrs(projs) == ptrs:
        return F.linear(x, *fused)
    bias = torch.cat([p.bias for p in projs]) if projs[0].bias is not None else None
    return F.linear(x, torch.cat([p.weight for p in projs]), bias)


class RMSNorm(Direct):
    """x / rms(x) * weight, in fp32, cast back before the weight (the order transformers uses)."""

    def __init__(self, dim: int, eps: float, device: torch.device | str | None = None) -> None:
        super().__init__()
        # [C] (or [D] for Qwen3's per-head q/k norm)
        self.weight = nn.Parameter(torch.ones(dim, device=device))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., dim] -> its norm, same shape and dtype."""
        # CPU fp32 inference: the same math as one C loop
        out = native_ops.rms_norm(x, self.weight, self.eps)
        if out is not None:
            return out
        # F.rms_norm is x * rsqrt(mean(x²) + eps) in one call (six ops inside). In fp32 the casts
        # are no-ops and the weight can go into the same call (the same products); otherwise the
        # cast comes before the weight.
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            return F.rms_norm(x, (x.shape[-1],), self.weight, eps=self.eps)
        return self.weight * F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype)

    def add_forward(self, x: torch.Tensor,
                    residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + residual, its norm), each shaped like x: a residual add and the norm after it.

        x is a fresh result of the caller's (an attention output): on CPU in fp32 inference the
        sum is written into it, in the same C loop as the norm.
        """
        # x += residual, then its norm
        out = native_ops.rms_norm(x, self.weight, self.eps, residual=residual)
        if out is not None:
            return x, out
        total = residual + x
        return total, self(total)
