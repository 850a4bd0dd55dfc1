"""Faster paged decode kernels, registered behind `paged_attention_decode(impl=...)`.

Importing this package registers:
- "fused":  tiled online-softmax decode in plain PyTorch (paged/kernels/fused.py); runs anywhere.
- "native": the same algorithm as a C kernel (paged/kernels/native.py), built with the system's C compiler on the
  first call; CPU only. Without a compiler the call raises RuntimeError saying so.
- "triton": a Triton kernel (paged/kernels/triton_decode.py). Registered lazily: triton is imported on the first
  call, so `import paged` never needs it. Without triton the call raises RuntimeError saying what to install.
"""

from __future__ import annotations

import importlib.util

import torch

from ..attention import register_decode_impl
from .fused import fused_decode
from .native import native_available, native_decode, native_error


def triton_available() -> bool:
    """True when the triton package can be imported (it says nothing about a GPU being present)."""
    return importlib.util.find_spec("triton") is not None


def _triton_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                   block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """impl="triton": import the kernel on first use, then run it."""
    if not triton_available():
        raise RuntimeError("impl='triton' needs the triton package: pip install triton (3.6 or newer); on a "
                           "CPU-only machine also set TRITON_INTERPRET=1 before triton is imported")
    from .triton_decode import triton_decode

    return triton_decode(query, key_cache, value_cache, block_tables, context_lens, scale)


__all__ = ["fused_decode", "native_available", "native_decode", "native_error", "triton_available"]

register_decode_impl("fused", fused_decode)
register_decode_impl("native", native_decode)
register_decode_impl("triton", _triton_decode)
