"""Boundary checks of the attention and K/V-write entry points: ValueError naming value and rule.

Shared by `paged.attention` (attention, gather_kv, paged_attention_decode / _prefill),
`paged.kv_cache` and the kernels behind them: every impl accepts and refuses the same inputs.
"""

from __future__ import annotations

import math
import numbers

import torch

from .addressing import (INT64_MAX, PAD_SLOT, blocks_needed, check_block_size, pad_block_tables,
                         validate_block_table)
from .checks import as_int, default_device

# what every decode impl supports
DECODE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# The most bytes one cache may hold unless told otherwise: a knob set by mistake is refused up
# front, not found as an out-of-memory error (or a swapping machine) halfway through.
MAX_CACHE_BYTES = 16 << 30


def tolerance(dtype: torch.dtype) -> float:
    """Relative error a paged result may show against the reference: 1e-5 (fp32/fp64), 1e-2."""
    return 1e-5 if dtype in (torch.float32, torch.float64) else 1e-2


def _check_tensors(**tensors) -> None:
    """Raises: ValueError naming the first of `tensors` that is no torch.Tensor."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")


def check_cache(key_cache: torch.Tensor, value_cache: torch.Tensor) -> None:
    """key_cache, value_cache: one shape [num_blocks, block_size, num_kv_heads, head_dim], a device.
    Raises: ValueError for another shape, a size of 0 or two devices."""
    _check_tensors(key_cache=key_cache, value_cache=value_cache)
    if key_cache.dim() != 4 or value_cache.shape != key_cache.shape:
        raise ValueError(f"key_cache/value_cache must both be [num_blocks, block_size, "
                         f"num_kv_heads, head_dim], got {tuple(key_cache.shape)} and "
                         f"{tuple(value_cache.shape)}")
    names = ("num_blocks", "block_size", "num_kv_heads", "head_dim")
    empty = [f"{name} = 0" for name, n in zip(names, key_cache.shape) if n < 1]
    if empty:
        raise ValueError(f"key_cache {tuple(key_cache.shape)} has {', '.join(empty)}: every size "
                         "must be >= 1")
    if value_cache.device != key_cache.device:
        raise ValueError(f"device mismatch: key_cache on {key_cache.device}, value_cache on "
                         f"{value_cache.device}")


def check_gather(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
                 context_len) -> int:
    """gather_kv's rules: `check_cache`, validate_block_table (distinct=False); context_len as int.
    Raises: ValueError naming the broken rule."""
    check_cache(key_cache, value_cache)
    context_len = as_int(context_len, "context_len", 1)
    validate_block_table(block_table, key_cache.shape[0], key_cache.shape[1], context_len,
                         distinct=False)
    return context_len


def check_mask_lens(q_len, context_len) -> tuple[int, int]:
    """causal_mask's rules: (q_len, context_len) as ints.
    Raises: ValueError unless 0 <= q_len <= context_len."""
    q_len, context_len = as_int(q_len, "q_len", 0), as_int(context_len, "context_len", 0)
    if q_len > context_len:
        raise ValueError(f"q_len ({q_len}) cannot exceed context_len ({context_len})")
    return q_len, context_len


def check_impl(impl, names) -> str:
    """impl, when it is one of `names` (paged.attention.DECODE_IMPLS).
    Raises: ValueError naming them otherwise."""
    if not isinstance(impl, str):
        raise ValueError(f"impl must be a string naming a decode impl, got {impl!r}")
    if impl not in names:
        raise ValueError(f"unknown impl {impl!r}; choose one of {sorted(names)}")
    return impl


def check_scale(scale, head_dim: int) -> float:
    """The softmax scale: 1 / sqrt(head_dim) for None, else `scale` as a float.
    Raises: ValueError unless it is a finite real number > 0 (not a bool)."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if (isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale)
            or scale <= 0):
        raise ValueError(f"scale must be a finite number > 0 (or None for 1/sqrt(head_dim)), got "
                         f"{scale!r}")
    return float(scale)


def check_attention_inputs(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                           scale=None, one_step: bool = False) -> tuple[torch.Tensor, float]:
    """`attention`'s rules: query [num_heads, head_dim] (one_step: only) or [q_len, num_heads,
    head_dim], keys, values [context_len, num_kv_heads, head_dim], floats on one device; returns
    (query as [q_len, num_heads, head_dim], check_scale(scale)).
    Raises: ValueError for a size < 1 (q_len may be 0), heads not grouping, dtype, device, scale."""
    _check_tensors(query=query, keys=keys, values=values)
    if query.dim() not in (2, 3) or keys.dim() != 3 or values.shape != keys.shape:
        raise ValueError(f"query must be [num_heads, head_dim] or [q_len, num_heads, head_dim] and "
                         f"keys/values [context_len, num_kv_heads, head_dim]; got "
                         f"{tuple(query.shape)}, {tuple(keys.shape)} and {tuple(values.shape)}")
    q = query.unsqueeze(0) if query.dim() == 2 else query  # [q_len, num_heads, head_dim]
    q_len, num_heads, head_dim = q.shape
    context_len, num_kv_heads = keys.shape[0], keys.shape[1]
    if min(num_heads, head_dim, context_len, num_kv_heads) < 1:
        raise ValueError(f"num_heads, head_dim, context_len and num_kv_heads must be >= 1; got "
                         f"query {tuple(query.shape)}, keys {tuple(keys.shape)}")
    if keys.shape[2] != head_dim:
        raise ValueError(f"head_dim differs: query has {head_dim}, keys have {keys.shape[2]}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads "
                         f"({num_kv_heads})")
    if not (query.is_floating_point() and keys.is_floating_point() and values.is_floating_point()):
        raise ValueError(f"query, keys and values must be floating-point, got {query.dtype}, "
                         f"{keys.dtype}, {values.dtype}")
    if not query.device == keys.device == values.device:
        raise ValueError(f"device mismatch: query on {query.device}, keys on {keys.device}, values "
                         f"on {values.device}")
    if one_step and query.dim() != 2:
        raise ValueError(f"query must be [num_heads, head_dim] (one decode step), got "
                         f"{tuple(query.shape)}")
    return q, check_scale(scale, head_dim)


def _int_tensor(name: str, values) -> torch.Tensor:
    """An int64 CPU tensor of `values` (an integer tensor, a list of integers or one integer).
    Raises: ValueError otherwise (a float would truncate: 1.9 is not 1; a bool is no count)."""
    if isinstance(values, torch.Tensor):
        if values.dtype == torch.bool or values.is_floating_point() or values.is_complex():
            raise ValueError(f"{name} must hold integers, got a {values.dtype} tensor")
        return values.to(device="cpu", dtype=torch.int64, copy=True)
    try:
        items = list(values)
    except TypeError:
        items = [values]  # one number for a batch of one
    ints = [as_int(x, f"{name}[{i}]") for i, x in enumerate(items)]
    bad = next((x for x in ints if not -INT64_MAX - 1 <= x <= INT64_MAX), None)
    if bad is not None:
        raise ValueError(f"{name} holds {bad}, which does not fit in int64")
    return torch.tensor(ints, dtype=torch.int64)


def check_decode_inputs(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                        block_tables, context_lens) -> tuple[torch.Tensor, torch.Tensor]:
    """Paged decode's boundary: (block_tables int32 [B, max_blocks], context_lens int64 [B]) on the
    cache's device, entries past a sequence's last used block set to -1 (never read).
    Raises: ValueError naming a bad shape, size, dtype, device, table entry or length."""
    _check_tensors(query=query)
    check_cache(key_cache, value_cache)
    if query.dim() != 3:
        raise ValueError(f"query must be [B, num_heads, head_dim], got shape {tuple(query.shape)}")
    batch, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, cache_head_dim = key_cache.shape
    if head_dim != cache_head_dim:
        raise ValueError(f"head_dim differs: query has {head_dim}, the cache has {cache_head_dim}")
    if num_heads < 1:
        raise ValueError(f"query {tuple(query.shape)} has num_heads = 0: it must be >= 1")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads "
                         f"({num_kv_heads})")
    if (query.dtype not in DECODE_DTYPES or query.dtype != key_cache.dtype
            or value_cache.dtype != key_cache.dtype):
        raise ValueError(f"dtype mismatch: query {query.dtype}, key_cache {key_cache.dtype}, "
                         f"value_cache {value_cache.dtype} (one dtype among "
                         f"{[str(d) for d in DECODE_DTYPES]})")
    if query.device != key_cache.device:
        raise ValueError(f"device mismatch: query on {query.device}, cache on {key_cache.device}")
    if isinstance(block_tables, torch.Tensor):
        tables = _int_tensor("block_tables", block_tables)
    else:
        tables = pad_block_tables(block_tables, dtype=torch.int64)
    if tables.dim() != 2 or tables.shape[0] != batch:
        raise ValueError(f"block_tables must be [B={batch}, max_blocks], got shape "
                         f"{tuple(tables.shape)}")
    lens = _int_tensor("context_lens", context_lens).reshape(-1)
    if lens.numel() != batch:
        raise ValueError(f"context_lens has {lens.numel()} entries for a batch of {batch}")
    for b, context_len in enumerate(lens.tolist()):
        if context_len < 1:
            raise ValueError(f"context_lens[{b}] = {context_len}: every sequence needs at least 1 "
                             "token")
        try:
            validate_block_table(tables[b], num_blocks, block_size, context_len)
        except ValueError as err:
            raise ValueError(f"sequence {b}: {err}") from None
        tables[b, blocks_needed(context_len, block_size):] = PAD_SLOT
    return tables.to(device=key_cache.device, dtype=torch.int32), lens.to(key_cache.device)


def decode_tensors(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                   block_tables, context_lens) -> tuple[torch.Tensor, torch.Tensor]:
    """paged_attention_decode(validate=False)'s block_tables [B, max_blocks] (lists: -1 padded) and
    context_lens int64 [B] on the cache's device, unchecked (right tensors pass as they are)."""
    device = key_cache.device
    if not isinstance(block_tables, torch.Tensor) or block_tables.device != device:
        block_tables = (block_tables if isinstance(block_tables, torch.Tensor)
                        else pad_block_tables(block_tables)).to(device)
    if (not isinstance(context_lens, torch.Tensor) or context_lens.dtype != torch.long
            or context_lens.device != device):
        context_lens = torch.as_tensor(context_lens, device=device).long()
    return block_tables, context_lens


def check_write(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor,
                value: torch.Tensor, slot_mapping: torch.Tensor, pads: bool = True) -> None:
    """`write_kv`'s boundary: nothing is written if a rule breaks; pads=False: no -1 slot either.
    Raises: ValueError naming the bad value."""
    for name, t in (("key_cache", key_cache), ("value_cache", value_cache), ("key", key),
                    ("value", value), ("slot_mapping", slot_mapping)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if key_cache.dim() != 4 or value_cache.shape != key_cache.shape:
        raise ValueError(f"key_cache/value_cache must both be [num_blocks, block_size, "
                         f"num_kv_heads, head_dim], got {tuple(key_cache.shape)} and "
                         f"{tuple(value_cache.shape)}")
    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    want = (num_kv_heads, head_dim)
    if key.dim() != 3 or tuple(key.shape[1:]) != want or value.shape != key.shape:
        raise ValueError(f"key/value must be [num_tokens, {num_kv_heads}, {head_dim}] to match the "
                         f"cache, got {tuple(key.shape)} and {tuple(value.shape)}")
    if slot_mapping.dim() != 1 or slot_mapping.numel() != key.shape[0]:
        raise ValueError(f"slot_mapping has {slot_mapping.numel()} entries but key/value have "
                         f"{key.shape[0]} rows: one slot per token is required")
    if key.dtype != key_cache.dtype or value.dtype != value_cache.dtype:
        raise ValueError(f"dtype mismatch: key/value are {key.dtype}/{value.dtype}, cache is "
                         f"{key_cache.dtype}")
    if len({key_cache.device, value_cache.device, key.device, value.device,
            slot_mapping.device}) > 1:
        raise ValueError(f"device mismatch: key on {key.device}, value on {value.device}, "
                         f"slot_mapping on {slot_mapping.device}, key_cache on {key_cache.device}, "
                         f"value_cache on {value_cache.device}")
    if slot_mapping.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"slot_mapping must be an integer tensor, got {slot_mapping.dtype}")
    if slot_mapping.numel():
        num_slots = num_blocks * block_size
        bad = (slot_mapping < -1) | (slot_mapping >= num_slots)
        if bool(bad.any()):
            slot = int(slot_mapping[bad][0])
            raise ValueError(f"slot {slot} is outside the pool: slots are in [0, {num_slots}) "
                             f"(num_blocks {num_blocks} x block_size {block_size}), or -1 to skip")
        written = slot_mapping[slot_mapping >= 0].sort().values
        repeated = written[1:][written[1:] == written[:-1]]
        if repeated.numel():
            raise ValueError(f"slot {int(repeated[0])} appears more than once in slot_mapping: "
                             "which token's K/V would land there is undefined, so one write call "
                             "takes each slot at most once")
        if not pads and bool((slot_mapping < 0).any()):
            raise ValueError("pads=False, but slot_mapping holds -1 (padding): pass pads=True to "
                             "skip those rows")


def check_prefill_inputs(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                         block_tables, context_lens,
                         query_lens) -> tuple[list[list[int]], list[int], list[int]]:
    """Paged prefill's boundary: (block_tables, context_lens, query_lens) as lists of ints.
    Raises: ValueError for a rule of `check_decode_inputs` (B sequences), query not [N = sum(
    query_lens), num_heads, head_dim], or a query_lens[b] outside [1, context_lens[b]]."""
    _check_tensors(query=query)
    qlens = _int_tensor("query_lens", query_lens).reshape(-1).tolist()
    if query.dim() != 3 or query.shape[0] != sum(qlens):
        raise ValueError(f"query must be [N = sum(query_lens) = {sum(qlens)}, num_heads, "
                         f"head_dim], got shape {tuple(query.shape)}")
    tables, lens = check_decode_inputs(query.new_empty((len(qlens), *query.shape[1:])), key_cache,
                                       value_cache, block_tables, context_lens)
    lens = lens.tolist()
    for b, (n, context_len) in enumerate(zip(qlens, lens)):
        if not 1 <= n <= context_len:
            raise ValueError(f"query_lens[{b}] = {n}: each sequence feeds 1 … context_len "
                             f"({context_len}) tokens")
    return tables.tolist(), lens, qlens


def check_cache_alloc(sizes: dict, dtype, device, what: str,
                      max_bytes: int) -> tuple[tuple[int, ...], torch.dtype, torch.device]:
    """(shape, dtype, device) of K (and V), `sizes` named, of the cache `what`.
    Raises: ValueError unless sizes are ints >= 1, dtype float, device known, K + V <= max_bytes."""
    shape = tuple(as_int(n, name, 1) for name, n in sizes.items())
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype (e.g. torch.float32), got "
                         f"{dtype!r}")
    try:
        device = default_device() if device is None else torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got "
                         f"{device!r}") from None
    need = 2 * math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if need > as_int(max_bytes, "max_bytes", 1):
        raise ValueError(f"{what} of shape {list(shape)} ({dtype}) would need {need:,} bytes "
                         f"({need / 2**30:.2f} GiB) for K and V, more than the limit of "
                         f"{max_bytes:,} bytes (max_bytes, default MAX_CACHE_BYTES); make it "
                         "smaller or raise max_bytes")
    return shape, dtype, device


def check_pool_alloc(num_layers, num_blocks, block_size, num_kv_heads, head_dim, dtype, device,
                     max_bytes: int) -> tuple[tuple[int, ...], torch.dtype, torch.device]:
    """KVCachePool's (shape, dtype, device): check_cache_alloc, block_size checked first.
    Raises: ValueError as check_cache_alloc."""
    check_block_size(block_size)
    sizes = dict(num_layers=num_layers, num_blocks=num_blocks, block_size=block_size,
                 num_kv_heads=num_kv_heads, head_dim=head_dim)
    return check_cache_alloc(sizes, dtype, device, "KVCachePool", max_bytes)


def check_reference_alloc(num_layers, capacity, num_kv_heads, head_dim, dtype, device,
                          max_bytes: int) -> tuple[tuple[int, ...], torch.dtype, torch.device]:
    """ContiguousKVCache's (shape, dtype, device) at `capacity` tokens: check_cache_alloc.
    Raises: ValueError as check_cache_alloc."""
    sizes = dict(num_layers=num_layers, capacity=capacity, num_kv_heads=num_kv_heads,
                 head_dim=head_dim)
    return check_cache_alloc(sizes, dtype, device, "ContiguousKVCache", max_bytes)


def check_layer(layer, num_layers: int) -> int:
    """ContiguousKVCache's layer index as an int.
    Raises: ValueError unless it is an integer in [0, num_layers)."""
    layer = as_int(layer, "layer")
    if not 0 <= layer < num_layers:
        raise ValueError(f"layer {layer} is outside [0, {num_layers})")
    return layer


def check_positions(input_pos, key, value, kv_shape: tuple[int, ...],
                    device: torch.device) -> torch.Tensor:
    """ContiguousKVCache.update's boundary: the positions as int64 [n] on `device`.
    Raises: ValueError for non-tensors, positions not integer, < 0 or repeated, shapes not [n] and
    [n, *kv_shape]."""
    _check_tensors(input_pos=input_pos, key=key, value=value)
    if input_pos.dtype == torch.bool or input_pos.is_floating_point() or input_pos.is_complex():
        raise ValueError(f"input_pos must be an integer tensor, got {input_pos.dtype}")
    want = (input_pos.numel(), *kv_shape)
    if input_pos.dim() != 1 or tuple(key.shape) != want or value.shape != key.shape:
        raise ValueError(f"input_pos {tuple(input_pos.shape)}, key {tuple(key.shape)} and value "
                         f"{tuple(value.shape)} must be [n] and [n, num_kv_heads, head_dim] = "
                         f"{list(want)}")
    pos = input_pos.to(device).long()
    if pos.numel() and int(pos.min()) < 0:
        raise ValueError(f"input_pos must be >= 0, got {int(pos.min())}")
    if pos.numel() > 1 and pos.unique().numel() != pos.numel():
        raise ValueError(f"input_pos repeats a position ({pos.tolist()[:16]}): which write wins is "
                         "undefined")
    return pos
