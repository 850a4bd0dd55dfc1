"""Gather-then-attend: PagedAttention's teaching kernel.

PagedAttention does not change attention's math, only where K and V come from. So the teaching kernel first
gathers a sequence's K/V through its block table into a contiguous tensor, then runs plain attention. Every result
here is checked (in tests) against the same attention over a contiguous KV cache holding the same data.

Shapes (one layer):
    key_cache, value_cache  [num_blocks, block_size, num_kv_heads, head_dim]
    block_table             [max_blocks] (one sequence) / block_tables [B, max_blocks], -1 padded
    query (decode)          [B, num_heads, head_dim]
"""

from __future__ import annotations

import math
import threading
from typing import Callable

import torch
import torch.nn.functional as F

from .addressing import pad_block_tables, validate_block_table


# ----------------------------------------------------------------------------------------------------------------
# Gather: logical K/V out of the paged pool
# ----------------------------------------------------------------------------------------------------------------
def gather_kv_loop(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
                   context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The teaching loop, one token at a time, exactly the address chain.

    Returns keys, values [context_len, num_kv_heads, head_dim] in logical token order.
    """
    block_size = key_cache.shape[1]
    keys, values = [], []
    for token_index in range(context_len):
        logical_block_id = token_index // block_size
        block_offset = token_index % block_size
        physical_block_id = int(block_table[logical_block_id])
        keys.append(key_cache[physical_block_id, block_offset])
        values.append(value_cache[physical_block_id, block_offset])
    return torch.stack(keys), torch.stack(values)


def gather_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
              context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Same result as `gather_kv_loop`, with no Python loop over tokens: compute every token's slot at once and
    index the pool viewed as [num_slots, num_kv_heads, head_dim]."""
    block_size = key_cache.shape[1]
    table = torch.as_tensor(block_table, dtype=torch.long, device=key_cache.device).reshape(-1)
    token_index = torch.arange(context_len, device=key_cache.device)
    slots = table[token_index // block_size] * block_size + token_index % block_size
    flat_k = key_cache.reshape(-1, *key_cache.shape[2:])
    flat_v = value_cache.reshape(-1, *value_cache.shape[2:])
    return flat_k.index_select(0, slots), flat_v.index_select(0, slots)


# ----------------------------------------------------------------------------------------------------------------
# Plain attention (the math PagedAttention leaves unchanged)
# ----------------------------------------------------------------------------------------------------------------
def attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float | None = None,
              causal: bool = False) -> torch.Tensor:
    """softmax(Q·Kᵀ·scale)·V per head, with grouped-query attention.

    query: decode [num_heads, head_dim] or prefill [q_len, num_heads, head_dim]
    keys, values: [context_len, num_kv_heads, head_dim]
    Query head h reads kv head h // (num_heads // num_kv_heads). With causal=True the mask is aligned to the end
    of the context: query i sees keys 0 … context_len - q_len + i. Computed in float32 (float64 stays float64),
    returned in the query's dtype.
    """
    decode = query.dim() == 2
    q = query.unsqueeze(0) if decode else query  # [q_len, num_heads, head_dim]
    q_len, num_heads, head_dim = q.shape
    context_len, num_kv_heads = keys.shape[0], keys.shape[1]
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    group = num_heads // num_kv_heads
    k = keys.to(compute).repeat_interleave(group, dim=1)  # [context_len, num_heads, head_dim]
    v = values.to(compute).repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.to(compute), k) * scale  # [num_heads, q_len, context_len]
    if causal:
        if q_len > context_len:
            raise ValueError(f"q_len ({q_len}) cannot exceed context_len ({context_len})")
        visible = (torch.arange(context_len, device=q.device)[None, :]
                   <= torch.arange(q_len, device=q.device)[:, None] + (context_len - q_len))
        scores = scores.masked_fill(~visible, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("hqk,khd->qhd", weights, v).to(query.dtype)
    return out[0] if decode else out


def attention_weights(query: torch.Tensor, keys: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Decode attention weights [num_heads, context_len] (for figures), same GQA rule as `attention`."""
    num_heads, head_dim = query.shape
    group = num_heads // keys.shape[1]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    k = keys.float().repeat_interleave(group, dim=1)
    return torch.softmax(torch.einsum("hd,khd->hk", query.float(), k) * scale, dim=-1)


# ----------------------------------------------------------------------------------------------------------------
# Batched decode over the paged pool
# ----------------------------------------------------------------------------------------------------------------
def check_decode_inputs(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables,
                        context_lens) -> tuple[torch.Tensor, torch.Tensor]:
    """Boundary checks for paged decode; returns (block_tables int32 [B, max_blocks], context_lens int64 [B]) on
    the cache's device. Raises ValueError naming the bad value."""
    if query.dim() != 3:
        raise ValueError(f"query must be [B, num_heads, head_dim], got shape {tuple(query.shape)}")
    if key_cache.dim() != 4 or value_cache.shape != key_cache.shape:
        raise ValueError(f"key_cache/value_cache must both be [num_blocks, block_size, num_kv_heads, head_dim], "
                         f"got {tuple(key_cache.shape)} and {tuple(value_cache.shape)}")
    batch, num_heads, head_dim = query.shape
    num_blocks, block_size, num_kv_heads, cache_head_dim = key_cache.shape
    if head_dim != cache_head_dim:
        raise ValueError(f"head_dim differs: query has {head_dim}, the cache has {cache_head_dim}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    if query.dtype != key_cache.dtype or value_cache.dtype != key_cache.dtype:
        raise ValueError(f"dtype mismatch: query {query.dtype}, key_cache {key_cache.dtype}, "
                         f"value_cache {value_cache.dtype}")
    if query.device != key_cache.device or value_cache.device != key_cache.device:
        raise ValueError(f"device mismatch: query on {query.device}, cache on {key_cache.device}")
    if isinstance(block_tables, torch.Tensor):
        tables = block_tables.to(device="cpu", dtype=torch.int64)
    else:
        tables = pad_block_tables(block_tables).long()
    if tables.dim() != 2 or tables.shape[0] != batch:
        raise ValueError(f"block_tables must be [B={batch}, max_blocks], got shape {tuple(tables.shape)}")
    lens = torch.as_tensor(context_lens, dtype=torch.int64).reshape(-1).cpu()
    if lens.numel() != batch:
        raise ValueError(f"context_lens has {lens.numel()} entries for a batch of {batch}")
    for b in range(batch):
        if int(lens[b]) < 1:
            raise ValueError(f"context_lens[{b}] = {int(lens[b])}: every sequence needs at least 1 token")
        try:
            validate_block_table(tables[b], num_blocks, block_size, int(lens[b]))
        except ValueError as err:
            raise ValueError(f"sequence {b}: {err}") from None
    return tables.to(device=key_cache.device, dtype=torch.int32), lens.to(key_cache.device)


def contiguous_attention_decode(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, context_lens,
                                scale: float | None = None) -> torch.Tensor:
    """The reference: decode attention over contiguous K/V [B, max_ctx, num_kv_heads, head_dim], sequence b using
    its first context_lens[b] tokens. Returns [B, num_heads, head_dim]."""
    lens = [int(n) for n in torch.as_tensor(context_lens).reshape(-1).tolist()]
    return torch.stack([attention(query[b], keys[b, :n], values[b, :n], scale) for b, n in enumerate(lens)])


def _decode_loop(query, key_cache, value_cache, block_tables, context_lens, scale):
    """impl="loop": the seed's per-token loop for each sequence, then plain attention."""
    tables, lens = block_tables.tolist(), context_lens.tolist()
    out = [attention(query[b], *gather_kv_loop(key_cache, value_cache, tables[b], lens[b]), scale)
           for b in range(query.shape[0])]
    return torch.stack(out)


class _Workspace(threading.local):
    """Per-thread reusable gather buffers: a large fresh buffer each call spends most of its time in page faults."""

    def __init__(self) -> None:
        self.buffers: dict[tuple, torch.Tensor] = {}

    def get(self, name: str, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        # Tensors made under inference_mode cannot be written outside it (and vice versa): keep them apart.
        key = (name, dtype, device, torch.is_inference_mode_enabled())
        buf = self.buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, device=device)
            self.buffers[key] = buf
        return buf[:numel]


_workspace = _Workspace()


def gather_batch(key_cache, value_cache, block_tables, context_lens, max_ctx: int | None = None):
    """Vectorised gather for a whole batch, a whole block at a time: K/V [B, max_ctx, num_kv_heads, head_dim] and
    the validity mask [B, max_ctx]. Rows past a sequence's context_len hold other data (block 0, or the rest of
    its last block) and must be masked. Buffers are reused (views into a per-thread workspace)."""
    batch, width = block_tables.shape
    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    max_ctx = int(context_lens.max()) if max_ctx is None else max_ctx
    device = key_cache.device
    used = -(-max_ctx // block_size)  # logical blocks read per sequence
    tables = block_tables.long()
    if used > width:  # a context_len past its table (only without validation): re-read the table's last entry
        tables = torch.cat([tables, tables[:, -1:].expand(batch, used - width)], dim=1)
    # Entries past a sequence's own last block are padding (-1 or stale ids): read block 0 there, masked anyway.
    in_use = torch.arange(used, device=device)[None, :] * block_size < context_lens[:, None]  # [B, used]
    block_ids = torch.where(in_use, tables[:, :used], 0).reshape(-1)  # [B * used]
    row = block_size * num_kv_heads * head_dim  # one physical block, flattened
    out_k = _workspace.get("k", batch * used * row, key_cache.dtype, device).view(-1, row)
    out_v = _workspace.get("v", batch * used * row, key_cache.dtype, device).view(-1, row)
    torch.index_select(key_cache.reshape(num_blocks, row), 0, block_ids, out=out_k)
    torch.index_select(value_cache.reshape(num_blocks, row), 0, block_ids, out=out_v)
    shape = (batch, used * block_size, num_kv_heads, head_dim)
    valid = torch.arange(max_ctx, device=device)[None, :] < context_lens[:, None]  # [B, max_ctx]
    return out_k.view(shape)[:, :max_ctx], out_v.view(shape)[:, :max_ctx], valid


def _decode_gather(query, key_cache, value_cache, block_tables, context_lens, scale):
    """impl="gather": one vectorised gather for the whole batch, then masked SDPA (no Python loop)."""
    keys, values, valid = gather_batch(key_cache, value_cache, block_tables, context_lens)
    q = query.unsqueeze(2)  # [B, num_heads, 1, head_dim]
    full = bool(valid.all())  # every sequence as long as the longest: no mask needed (SDPA's faster path)
    out = F.scaled_dot_product_attention(q, keys.transpose(1, 2), values.transpose(1, 2),
                                         attn_mask=None if full else valid[:, None, None, :], scale=scale,
                                         enable_gqa=query.shape[1] != key_cache.shape[2])
    return out.squeeze(2)


DecodeImpl = Callable[..., torch.Tensor]
DECODE_IMPLS: dict[str, DecodeImpl] = {"loop": _decode_loop, "gather": _decode_gather}


def register_decode_impl(name: str, fn: DecodeImpl) -> None:
    """Add a faster kernel behind `paged_attention_decode(impl=name)` (same signature as the built-ins)."""
    DECODE_IMPLS[name] = fn


def paged_attention_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables,
                           context_lens, scale: float | None = None, impl: str = "gather",
                           validate: bool = True) -> torch.Tensor:
    """Decode attention for a batch, reading each sequence's history through its block table.

    query [B, num_heads, head_dim]; key_cache/value_cache [num_blocks, block_size, num_kv_heads, head_dim];
    block_tables int [B, max_blocks] padded with -1 (or a list of lists); context_lens int [B], each >= 1.
    Returns [B, num_heads, head_dim] in the query's dtype. impl: "loop" (the seed's per-token loop), "gather"
    (vectorised), or a kernel registered by paged.kernels. validate=False skips the checks (benchmarks).
    """
    if impl not in DECODE_IMPLS:
        from . import kernels  # noqa: F401  (registers the faster impls)
    if impl not in DECODE_IMPLS:
        raise ValueError(f"unknown impl {impl!r}; choose one of {sorted(DECODE_IMPLS)}")
    if validate:
        block_tables, context_lens = check_decode_inputs(query, key_cache, value_cache, block_tables, context_lens)
    else:
        if not isinstance(block_tables, torch.Tensor):
            block_tables = pad_block_tables(block_tables)
        block_tables = block_tables.to(key_cache.device)
        context_lens = torch.as_tensor(context_lens, device=key_cache.device).long()
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    return DECODE_IMPLS[impl](query, key_cache, value_cache, block_tables, context_lens, scale).to(query.dtype)
