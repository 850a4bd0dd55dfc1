"""Boundary checks of the attention and K/V-write entry points: each broken rule raises ValueError naming the value
and the rule.

Shared by `paged.attention` (attention, gather_kv, paged_attention_decode, paged_attention_prefill),
`paged.kv_cache.write_kv` and the kernels behind them, so every impl accepts and refuses exactly the same inputs.
"""

from __future__ import annotations

import math
import numbers

import torch

from .addressing import INT64_MAX, PAD_SLOT, blocks_needed, pad_block_tables, validate_block_table
from .checks import as_int

DECODE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)  # what every decode impl supports


def _check_tensors(**tensors) -> None:
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")


def check_cache(key_cache: torch.Tensor, value_cache: torch.Tensor) -> None:
    """key_cache and value_cache: tensors of one shape [num_blocks, block_size, num_kv_heads, head_dim], each size
    >= 1, on one device."""
    _check_tensors(key_cache=key_cache, value_cache=value_cache)
    if key_cache.dim() != 4 or value_cache.shape != key_cache.shape:
        raise ValueError(f"key_cache/value_cache must both be [num_blocks, block_size, num_kv_heads, head_dim], "
                         f"got {tuple(key_cache.shape)} and {tuple(value_cache.shape)}")
    names = ("num_blocks", "block_size", "num_kv_heads", "head_dim")
    empty = [f"{name} = 0" for name, n in zip(names, key_cache.shape) if n < 1]
    if empty:
        raise ValueError(f"key_cache {tuple(key_cache.shape)} has {', '.join(empty)}: every size must be >= 1")
    if value_cache.device != key_cache.device:
        raise ValueError(f"device mismatch: key_cache on {key_cache.device}, value_cache on {value_cache.device}")


def check_gather(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table, context_len) -> int:
    """gather_kv's rules (`check_cache`, then validate_block_table with distinct=False); returns context_len."""
    check_cache(key_cache, value_cache)
    context_len = as_int(context_len, "context_len", 1)
    validate_block_table(block_table, key_cache.shape[0], key_cache.shape[1], context_len, distinct=False)
    return context_len


def check_mask_lens(q_len, context_len) -> tuple[int, int]:
    """causal_mask's rules: (q_len, context_len) as ints, ValueError unless 0 <= q_len <= context_len."""
    q_len, context_len = as_int(q_len, "q_len", 0), as_int(context_len, "context_len", 0)
    if q_len > context_len:
        raise ValueError(f"q_len ({q_len}) cannot exceed context_len ({context_len})")
    return q_len, context_len


def check_impl(impl, names) -> str:
    """impl, when it is one of `names` (paged.attention.DECODE_IMPLS). Raises: ValueError naming them else."""
    if not isinstance(impl, str):
        raise ValueError(f"impl must be a string naming a decode impl, got {impl!r}")
    if impl not in names:
        raise ValueError(f"unknown impl {impl!r}; choose one of {sorted(names)}")
    return impl


def check_scale(scale, head_dim: int) -> float:
    """The softmax scale to use: 1 / sqrt(head_dim) for None, else `scale` as a float. Raises ValueError unless it
    is a real number (not a bool) that is finite and > 0."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a finite number > 0 (or None for 1/sqrt(head_dim)), got {scale!r}")
    return float(scale)


def check_attention_inputs(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
    """The rules of `paged.attention.attention`: query [num_heads, head_dim] or [q_len, num_heads, head_dim],
    keys/values [context_len, num_kv_heads, head_dim], sizes >= 1 (q_len may be 0), num_heads a multiple of
    num_kv_heads, floating-point dtypes, one device."""
    _check_tensors(query=query, keys=keys, values=values)
    if query.dim() not in (2, 3) or keys.dim() != 3 or values.shape != keys.shape:
        raise ValueError(f"query must be [num_heads, head_dim] or [q_len, num_heads, head_dim] and keys/values "
                         f"[context_len, num_kv_heads, head_dim]; got {tuple(query.shape)}, {tuple(keys.shape)} "
                         f"and {tuple(values.shape)}")
    q = query.unsqueeze(0) if query.dim() == 2 else query  # [q_len, num_heads, head_dim]
    q_len, num_heads, head_dim = q.shape
    context_len, num_kv_heads = keys.shape[0], keys.shape[1]
    if min(num_heads, head_dim, context_len, num_kv_heads) < 1:
        raise ValueError(f"num_heads, head_dim, context_len and num_kv_heads must be >= 1; got query "
                         f"{tuple(query.shape)}, keys {tuple(keys.shape)}")
    if keys.shape[2] != head_dim:
        raise ValueError(f"head_dim differs: query has {head_dim}, keys have {keys.shape[2]}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    if not (query.is_floating_point() and keys.is_floating_point() and values.is_floating_point()):
        raise ValueError(f"query, keys and values must be floating-point, got {query.dtype}, {keys.dtype}, "
                         f"{values.dtype}")
    if not query.device == keys.device == values.device:
        raise ValueError(f"device mismatch: query on {query.device}, keys on {keys.device}, values on "
                         f"{values.device}")


def _int_tensor(name: str, values) -> torch.Tensor:
    """An int64 CPU tensor of `values` (an integer tensor, a list of integers or one integer); ValueError otherwise:
    a float would silently truncate (1.9 is not 1), a bool is no count."""
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


def check_decode_inputs(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables,
                        context_lens) -> tuple[torch.Tensor, torch.Tensor]:
    """Boundary checks for paged decode; returns (block_tables int32 [B, max_blocks], context_lens int64 [B]) on
    the cache's device, with every table entry past its sequence's last used block set to -1 (never read).
    Raises ValueError naming the bad value: shapes, sizes of 0, dtypes, devices, non-integer tables or lengths,
    and each rule of `validate_block_table`."""
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
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    if query.dtype not in DECODE_DTYPES or query.dtype != key_cache.dtype or value_cache.dtype != key_cache.dtype:
        raise ValueError(f"dtype mismatch: query {query.dtype}, key_cache {key_cache.dtype}, "
                         f"value_cache {value_cache.dtype} (one dtype among {[str(d) for d in DECODE_DTYPES]})")
    if query.device != key_cache.device:
        raise ValueError(f"device mismatch: query on {query.device}, cache on {key_cache.device}")
    if isinstance(block_tables, torch.Tensor):
        tables = _int_tensor("block_tables", block_tables)
    else:
        tables = pad_block_tables(block_tables, dtype=torch.int64)
    if tables.dim() != 2 or tables.shape[0] != batch:
        raise ValueError(f"block_tables must be [B={batch}, max_blocks], got shape {tuple(tables.shape)}")
    lens = _int_tensor("context_lens", context_lens).reshape(-1)
    if lens.numel() != batch:
        raise ValueError(f"context_lens has {lens.numel()} entries for a batch of {batch}")
    for b, context_len in enumerate(lens.tolist()):
        if context_len < 1:
            raise ValueError(f"context_lens[{b}] = {context_len}: every sequence needs at least 1 token")
        try:
            validate_block_table(tables[b], num_blocks, block_size, context_len)
        except ValueError as err:
            raise ValueError(f"sequence {b}: {err}") from None
        tables[b, blocks_needed(context_len, block_size):] = PAD_SLOT
    return tables.to(device=key_cache.device, dtype=torch.int32), lens.to(key_cache.device)


def decode_tensors(block_tables, context_lens, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """paged_attention_decode(validate=False)'s inputs, unchecked, as tensors on `device`: block_tables (a tensor, or
    lists padded with -1) and context_lens int64. Tensors already right are passed through as they are."""
    if not isinstance(block_tables, torch.Tensor) or block_tables.device != device:
        block_tables = (block_tables if isinstance(block_tables, torch.Tensor)
                        else pad_block_tables(block_tables)).to(device)
    if not isinstance(context_lens, torch.Tensor) or context_lens.dtype != torch.long or context_lens.device != device:
        context_lens = torch.as_tensor(context_lens, device=device).long()
    return block_tables, context_lens


def check_write(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                slot_mapping: torch.Tensor, pads: bool = True) -> None:
    """The boundary checks of `write_kv` (ValueError naming the bad value); nothing is written. pads=False: the
    caller promised no -1 slot, so one is an error too."""
    for name, t in (("key_cache", key_cache), ("value_cache", value_cache), ("key", key), ("value", value),
                    ("slot_mapping", slot_mapping)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if key_cache.dim() != 4 or value_cache.shape != key_cache.shape:
        raise ValueError(f"key_cache/value_cache must both be [num_blocks, block_size, num_kv_heads, head_dim], "
                         f"got {tuple(key_cache.shape)} and {tuple(value_cache.shape)}")
    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    want = (num_kv_heads, head_dim)
    if key.dim() != 3 or tuple(key.shape[1:]) != want or value.shape != key.shape:
        raise ValueError(f"key/value must be [num_tokens, {num_kv_heads}, {head_dim}] to match the cache, got "
                         f"{tuple(key.shape)} and {tuple(value.shape)}")
    if slot_mapping.dim() != 1 or slot_mapping.numel() != key.shape[0]:
        raise ValueError(f"slot_mapping has {slot_mapping.numel()} entries but key/value have {key.shape[0]} rows: "
                         "one slot per token is required")
    if key.dtype != key_cache.dtype or value.dtype != value_cache.dtype:
        raise ValueError(f"dtype mismatch: key/value are {key.dtype}/{value.dtype}, cache is {key_cache.dtype}")
    if len({key_cache.device, value_cache.device, key.device, value.device, slot_mapping.device}) > 1:
        raise ValueError(f"device mismatch: key on {key.device}, value on {value.device}, slot_mapping on "
                         f"{slot_mapping.device}, key_cache on {key_cache.device}, value_cache on "
                         f"{value_cache.device}")
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
            raise ValueError(f"slot {int(repeated[0])} appears more than once in slot_mapping: which token's K/V "
                             "would land there is undefined, so one write call takes each slot at most once")
        if not pads and bool((slot_mapping < 0).any()):
            raise ValueError("pads=False, but slot_mapping holds -1 (padding): pass pads=True to skip those rows")


def check_prefill_inputs(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables,
                         context_lens, query_lens) -> tuple[list[list[int]], list[int], list[int]]:
    """Boundary checks for paged prefill; returns (block_tables, context_lens, query_lens) as lists of ints.
    Raises ValueError naming the bad value: every rule of `check_decode_inputs` (for the batch of B sequences),
    query not [N, num_heads, head_dim] with N = sum(query_lens), a query_lens[b] < 1 or > context_lens[b]."""
    _check_tensors(query=query)
    qlens = _int_tensor("query_lens", query_lens).reshape(-1).tolist()
    if query.dim() != 3 or query.shape[0] != sum(qlens):
        raise ValueError(f"query must be [N = sum(query_lens) = {sum(qlens)}, num_heads, head_dim], got shape "
                         f"{tuple(query.shape)}")
    tables, lens = check_decode_inputs(query.new_empty((len(qlens), *query.shape[1:])), key_cache, value_cache,
                                       block_tables, context_lens)
    lens = lens.tolist()
    for b, (n, context_len) in enumerate(zip(qlens, lens)):
        if not 1 <= n <= context_len:
            raise ValueError(f"query_lens[{b}] = {n}: each sequence feeds 1 … context_len ({context_len}) tokens")
    return tables.tolist(), lens, qlens


def check_cache_alloc(sizes: dict, dtype, device, what: str,
                      max_bytes: int) -> tuple[tuple[int, ...], torch.dtype, torch.device]:
    """(shape, dtype, device) of K (and V) after the boundary checks: every size an integer >= 1, a floating dtype, a
    device torch knows, K + V within max_bytes. Raises ValueError naming the bad value."""
    shape = tuple(as_int(n, name, 1) for name, n in sizes.items())
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype (e.g. torch.float32), got {dtype!r}")
    try:
        if device is None:  # the default: cuda when available, else cpu
            device = "cuda" if torch.cuda.is_available() else "cpu"
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}") from None
    need = 2 * math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if need > as_int(max_bytes, "max_bytes", 1):
        raise ValueError(f"{what} of shape {list(shape)} ({dtype}) would need {need:,} bytes ({need / 2**30:.2f} GiB) "
                         f"for K and V, more than the limit of {max_bytes:,} bytes (max_bytes, default "
                         "MAX_CACHE_BYTES); make it smaller or raise max_bytes")
    return shape, dtype, device


def check_layer(layer, num_layers: int) -> int:
    """ContiguousKVCache's layer index as an int; ValueError unless it is an integer in [0, num_layers)."""
    layer = as_int(layer, "layer")
    if not 0 <= layer < num_layers:
        raise ValueError(f"layer {layer} is outside [0, {num_layers})")
    return layer


def check_positions(input_pos, key, value, kv_shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """ContiguousKVCache.update's boundary checks; returns the positions as int64 [n] on `device`. Raises
    ValueError for non-tensors, non-integer, negative or repeated positions, or shapes unlike [n] and [n, *kv_shape]."""
    _check_tensors(input_pos=input_pos, key=key, value=value)
    if input_pos.dtype == torch.bool or input_pos.is_floating_point() or input_pos.is_complex():
        raise ValueError(f"input_pos must be an integer tensor, got {input_pos.dtype}")
    want = (input_pos.numel(), *kv_shape)
    if input_pos.dim() != 1 or tuple(key.shape) != want or value.shape != key.shape:
        raise ValueError(f"input_pos {tuple(input_pos.shape)}, key {tuple(key.shape)} and value "
                         f"{tuple(value.shape)} must be [n] and [n, num_kv_heads, head_dim] = {list(want)}")
    pos = input_pos.to(device).long()
    if pos.numel() and int(pos.min()) < 0:
        raise ValueError(f"input_pos must be >= 0, got {int(pos.min())}")
    if pos.numel() > 1 and pos.unique().numel() != pos.numel():
        raise ValueError(f"input_pos repeats a position ({pos.tolist()[:16]}): which write wins is undefined")
    return pos
