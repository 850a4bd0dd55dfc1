"""Faster implementations behind the reference path's signatures: the decode kernels and their registry
(registry.py: "fused", "native", "triton"), the K/V write in C and the pool in huge pages (kv_fast.py), the model's
small ops in C (native_ops.py), the engine's once-per-step native plan (native_step.py), reusable buffers
(workspace.py) and the one-pass block-table check (tables.py). Nothing here imports paged.attention."""

from __future__ import annotations

from .fused import fused_decode
from .native import native_available, native_decode, native_error
import torch

from .registry import DECODE_IMPLS, REFERENCE_IMPLS, decode_impl, register_decode_impl, triton_available

__all__ = ["DECODE_IMPLS", "REFERENCE_IMPLS", "decode_impl", "default_attn_impl", "fused_decode", "native_available",
           "native_decode", "native_error", "register_decode_impl", "triton_available"]


def default_attn_impl(device: torch.device) -> str:
    """The fastest correct decode impl for the device at this project's model sizes (LLMEngine's default).

    CUDA: the Triton kernel when triton is importable. CPU: the C kernel "native" when it can be built (a C compiler
    is present), else "gather". Measured with `python -m paged.bench engine` on the shipped model (head_dim 32, 2 kv
    heads, contexts < 300, 1 thread), 2026-11-29: native gave paged/contiguous 1.04x / 2.07x / 3.62x at batch 1 / 8 /
    32 where gather gave 0.95x / 2.06x / 2.94x. "fused" trails both at these sizes: its per-tile op dispatch only pays
    off on long contexts (see `python -m paged.bench kernels`).
    """
    if device.type == "cuda":
        return "triton" if triton_available() else "gather"
    return "native" if native_available() else "gather"
