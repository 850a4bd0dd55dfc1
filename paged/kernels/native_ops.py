"""The model's small ops in C, for CPU inference: RMSNorm (optionally with the residual add before
it), RoPE in place, SwiGLU's silu(gate) * up in place, and the K/V write through slot_mapping. Built
into the same library as impl="native" (native_ops.h).

At decode these ops handle a few thousand numbers each, and torch's cost is dispatching them:
F.rms_norm is six ops, RoPE four, SwiGLU's middle two, a K/V write two index_copy_ calls. Inside an
engine step, whose K/V reads push torch's code out of the caches, each costs 10-50 us; the C loop
costs 1-5 us with its Python. The math is the same (see native_ops.h), so every caller keeps torch's
op as the reference path and takes this one only where it fits:
- float32 tensors on the CPU (the K/V write: any dtype, copied as bytes), laid out as the function
  says;
- no autograd: `torch.is_grad_enabled()` False (RMSNorm's residual sum, RoPE and SwiGLU write into
  their input);
- the library built (a C compiler, see native_build.py) and `enabled` True. Each function returns
  None where it does not fit, and the caller runs torch's ops instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
from typing import Iterator

import torch

from . import native

_I64, _PTR, _F64 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
# Each C function takes its arguments packed in one int64 array (see the end of native_ops.h),
# RMSNorm's eps apart.
_SIGNATURES = {"paged_rms_norm": [_PTR, _F64], "paged_rope": [_PTR], "paged_silu_mul": [_PTR],
               "paged_write_rows": [_PTR]}
_NORM_ARGS, _ROPE_ARGS, _SILU_ARGS, _WRITE_ARGS = (struct.Struct("6q"), struct.Struct("8q"),
                                                   struct.Struct("5q"), struct.Struct("10q"))
MAX_ROPE_HEAD_DIM = 1024  # paged_rope's scratch row

_F32 = torch.float32
_grad_enabled = torch.is_grad_enabled
# [dict of C functions] once loaded, [None] when the library cannot be had (asked once)
_loaded: list = []
enabled = True  # False: every function returns None (callers run torch's ops); see torch_ops()


@contextlib.contextmanager
def torch_ops() -> Iterator[None]:
    """Within this block the model and write_kv run torch's ops only (for comparisons and
    benchmarks)."""
    global enabled
    before, enabled = enabled, False
    try:
        yield
    finally:
        enabled = before


def _functions() -> dict | None:
    """The C functions, loaded once per process; None when the library cannot be built or loaded."""
    if not _loaded:
        try:
            lib = native.library()
            fns = {}
            for name, argtypes in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = _I64, argtypes
                fns[name] = fn
            _loaded.append(fns)
        # no compiler, a failed build: torch's ops it is (native_error() says why)
        except RuntimeError:
            _loaded.append(None)
    return _loaded[0]


def _ready(x: torch.Tensor) -> dict | None:
    """The C functions when `x` may go through them: enabled, float32 on the CPU, no autograd; else
    None."""
    if not enabled or x.dtype is not _F32 or not x.is_cpu or _grad_enabled():
        return None
    return _loaded[0] if _loaded else _functions()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None) -> torch.Tensor | None:
    """x [..., C] contiguous -> x / rms(x) * weight [..., C] (a new tensor), as F.rms_norm.

    Float32. With `residual` (x's shape, contiguous): x += residual first, in place, and the norm is
    of that sum. None where it does not fit. (Its checks are few and cheap on purpose: at decode
    this call costs ~5 us, of which the C loop is ~1.5.)
    """
    fns = _ready(x)
    shape = x.shape
    if fns is None or not shape or not x.is_contiguous():
        return None
    cols = shape[-1]
    if (weight.shape != shape[-1:] or weight.dtype is not _F32 or not weight.is_contiguous()
            or not weight.is_cpu):
        return None
    if residual is not None and (residual.shape != shape or residual.dtype is not _F32
                                 or not residual.is_contiguous() or not residual.is_cpu):
        return None
    out = torch.empty_like(x)
    if cols:
        fns["paged_rms_norm"](_NORM_ARGS.pack(x.data_ptr(),
                                              0 if residual is None else residual.data_ptr(),
                                              weight.data_ptr(), out.data_ptr(), x.numel() // cols,
                                              cols), eps)
    return out


def rope_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor | None:
    """Rotate-half RoPE of x [N, heads, D] in place, with cos and signed sin [N, 1, D]; returns x.

    x * cos + roll(x, D/2) * sin, as paged.model.rope.apply_rope. Each row's D values of cos and sin
    contiguous, both with the same row stride (RotaryEmbedding hands views of one [N, 2, D] lookup).
    Each row's heads must lie one after another (x may be a narrow of a wider row, as the model's
    q|k part of q|k|v). None where it does not fit.
    """
    fns = _ready(x)
    if fns is None or x.dim() != 3:
        return None
    n, heads, d = shape = x.shape
    rows = (n, 1, d)
    row_stride, head_stride, step = x.stride()
    if (step != 1 or head_stride != d or d % 2 or d > MAX_ROPE_HEAD_DIM or cos.shape != rows
            or sin.shape != rows or cos.dtype is not _F32 or sin.dtype is not _F32
            or not (cos.is_cpu and sin.is_cpu)):
        return None
    trig_stride, _, trig_step = cos.stride()
    if trig_step != 1 or sin.stride() != (trig_stride, _, 1):
        return None
    if n and heads:
        fns["paged_rope"](_ROPE_ARGS.pack(x.data_ptr(), row_stride, cos.data_ptr(), sin.data_ptr(),
                                          trig_stride, *shape))
    return x


def silu_mul_(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor | None:
    """gate = silu(gate) * up in place, gate and up [N, I]; returns gate.

    SwiGLU's middle, as F.silu(gate, inplace=True).mul_(up). gate and up, each row contiguous, both
    rows the same stride apart (halves of one [N, 2I] matmul output, or contiguous). None where it
    does not fit.
    """
    fns = _ready(gate)
    if (fns is None or gate.dim() != 2 or up.shape != gate.shape or up.dtype is not _F32
            or not up.is_cpu):
        return None
    stride, step = gate.stride()
    if step != 1 or up.stride() != (stride, 1):
        return None
    rows, cols = gate.shape
    if rows and cols:
        fns["paged_silu_mul"](_SILU_ARGS.pack(gate.data_ptr(), up.data_ptr(), stride, rows, cols))
    return gate


def write_rows(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor, slots: torch.Tensor) -> bool:
    """key_cache.flatten(0, 1)[slots] = key, the same for value, in one C call; True when done.

    key, value [N, num_kv_heads, head_dim] (each row contiguous, any dtype the caches have), caches
    contiguous [num_blocks, block_size, num_kv_heads, head_dim], slots int64 [N] contiguous. False
    (nothing written) where it does not fit.
    Raises: ValueError (nothing written) for a slot outside the pool.
    """
    dtype = key.dtype
    if not enabled or key_cache.dtype is not dtype or not key_cache.is_cpu:
        return False
    fns = _loaded[0] if _loaded else _functions()
    shape, cache_shape = key.shape, key_cache.shape
    if (fns is None or len(shape) != 3 or len(cache_shape) != 4 or value.shape != shape
            or value.dtype is not dtype or value_cache.shape != cache_shape
            or value_cache.dtype is not dtype or cache_shape[2:] != shape[1:]
            or not (key_cache.is_contiguous() and value_cache.is_contiguous())
            or not (value_cache.is_cpu and key.is_cpu and value.is_cpu and slots.is_cpu)
            or slots.dtype is not torch.int64 or slots.shape != shape[:1]
            or not slots.is_contiguous()):
        return False
    row = shape[2]  # each row's kv heads one after another, each head's values contiguous
    key_stride, key_head, key_step = key.stride()
    value_stride, value_head, value_step = value.stride()
    if key_step != 1 or value_step != 1 or key_head != row or value_head != row:
        return False
    size = key.element_size()
    status = fns["paged_write_rows"](_WRITE_ARGS.pack(
        key_cache.data_ptr(), value_cache.data_ptr(), key.data_ptr(), value.data_ptr(),
        key_stride * size, value_stride * size, slots.data_ptr(), shape[0], shape[1] * row * size,
        cache_shape[0] * cache_shape[1]))
    if status:
        raise ValueError(f"slot {int(slots[status - 1])} (row {status - 1}) is outside the pool's "
                         f"{key_cache.shape[0] * key_cache.shape[1]} slots; nothing was written")
    return True
