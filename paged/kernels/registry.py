"""The impl registry: every name `paged_attention_decode(impl=...)` and `LLMEngine(attn_impl=...)` accept, and the
decode function behind it, fn(query, key_cache, value_cache, block_tables, context_lens, scale).

paged/attention.py registers its own two ("loop", "gather": the reference path); the faster kernels are here:
- "fused":  tiled online-softmax decode in plain PyTorch (fused.py); runs anywhere.
- "native": the same algorithm as a C kernel (native.py), built with the system's C compiler on the first call;
  CPU only. Without a compiler the call raises RuntimeError saying so.
- "triton": a Triton kernel (triton_decode.py), imported on its first call, so `import paged` never needs triton.
Nothing here imports paged.attention: the arrows point from the article to its kernels, never back.
"""

from __future__ import annotations

import importlib.util
from typing import Callable

import torch

from .fused import fused_decode
from .native import native_decode

DecodeImpl = Callable[..., torch.Tensor]
REFERENCE_IMPLS = ("loop", "gather")  # paged/attention.py's: any other impl is a fast path of this folder


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


# In the ladder's order, slowest first. The reference impls are filled in by paged/attention.py when it is imported.
DECODE_IMPLS: dict[str, DecodeImpl | None] = {"loop": None, "gather": None, "fused": fused_decode,
                                              "native": native_decode, "triton": _triton_decode}


def register_decode_impl(name: str, fn: DecodeImpl) -> None:
    """Add a kernel behind `paged_attention_decode(impl=name)` (same signature as the others)."""
    DECODE_IMPLS[name] = fn


def decode_impl(name: str) -> DecodeImpl:
    """The decode function named `name`; raises ValueError for anything else, listing the names."""
    if not isinstance(name, str):
        raise ValueError(f"impl must be a string naming a decode impl, got {name!r}")
    fn = DECODE_IMPLS.get(name)
    if fn is None:
        raise ValueError(f"unknown impl {name!r}; choose one of {sorted(DECODE_IMPLS)}")
    return fn
