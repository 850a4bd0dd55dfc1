"""Faster implementations behind the article's signatures: the decode kernels "gather" (gather.py),
"fused" (fused.py), "native" (native.py, a C kernel, with DecodeStep: the engine's once-per-step
plan of it; its threads, partitions and prefetching: native_plan.py) and "triton"
(triton_decode.py, imported on its first call), chosen by name in
paged.attention.DECODE_IMPLS; the K/V write in C and the model's small ops in C (native_ops.py); the
pool in huge pages (kv_fast.py); reusable buffers (workspace.py). Nothing here imports
paged.attention or paged.kv_cache: the arrows point from the article to its kernels, never back."""

from __future__ import annotations

import importlib.util

import torch

from .fused import fused_decode
from .gather import gather_decode
from .native import DecodeStep, native_available, native_decode, native_error

__all__ = ["DecodeStep", "REFERENCE_IMPLS", "default_attn_impl", "fused_decode", "gather_decode",
           "native_available", "native_decode", "native_error", "triton_available", "triton_kernel"]

# the article's gather-then-attend: with them the engine takes no fast path
REFERENCE_IMPLS = ("loop", "gather")


def triton_available() -> bool:
    """True when the triton package can be imported (it says nothing about a GPU being present)."""
    return importlib.util.find_spec("triton") is not None


def triton_kernel(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                  block_tables: torch.Tensor, context_lens: torch.Tensor,
                  scale: float) -> torch.Tensor:
    """impl="triton": triton_decode.py's kernel; shapes as paged_attention_decode.

    Imported on its first call, so `import paged` never needs triton.
    Raises: RuntimeError if triton cannot be imported.
    """
    if not triton_available():
        raise RuntimeError("impl='triton' needs the triton package: pip install triton (3.6 or "
                           "newer); on a CPU-only machine also set TRITON_INTERPRET=1 before "
                           "triton is imported")
    from .triton_decode import triton_decode

    return triton_decode(query, key_cache, value_cache, block_tables, context_lens, scale)


def default_attn_impl(device: torch.device) -> str:
    """The fastest correct decode impl for the device at this project's sizes (LLMEngine's default).

    CUDA: the Triton kernel when triton is importable. CPU: the C kernel "native" when it can be
    built (a C compiler is present), else "gather". Measured with `python -m benchmarks engine` on
    the shipped model (head_dim 32, 2 kv heads, contexts < 300, 1 thread), 2026-11-29: native gave
    paged/contiguous 1.04x / 2.07x / 3.62x at batch 1 / 8 / 32 where gather gave 0.95x / 2.06x /
    2.94x. "fused" trails both at these sizes: its per-tile op dispatch only pays off on long
    contexts (see `python -m benchmarks kernels`).
    """
    if device.type == "cuda":
        return "triton" if triton_available() else "gather"
    return "native" if native_available() else "gather"
