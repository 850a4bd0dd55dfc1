"""Gather-then-attend: PagedAttention's teaching kernel.

PagedAttention does not change attention's math, only where K and V come from. So the teaching kernel first
gathers a sequence's K/V through its block table into a contiguous tensor, then runs plain attention. Every result
here is checked (in tests) against the same attention over a contiguous KV cache holding the same data. This file
is the reference path; faster kernels behind the same two calls live in paged/kernels/ (chosen by `impl`).

Shapes (one layer):
    key_cache, value_cache  [num_blocks, block_size, num_kv_heads, head_dim]
    block_tables            [B, max_blocks] int, -1 padded;  context_lens [B]: tokens each sequence reads
    query                   decode [B, num_heads, head_dim];  prefill [N, num_heads, head_dim], N = sum(query_lens)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .addressing import blocks_needed, pad_block_tables, slot_mapping, validate_block_table
from .attention_checks import (check_attention_inputs, check_cache, check_decode_inputs, check_prefill_inputs,
                               check_scale)
from .checks import as_int
from .kernels.registry import DECODE_IMPLS, decode_impl, register_decode_impl  # noqa: F401 (re-exported)


def tolerance(dtype: torch.dtype) -> float:
    """Relative error a paged result may show against the contiguous reference in this dtype (fp32/fp64: 1e-5,
    half precisions: 1e-2): one number for the pages, the tests and the GPU check."""
    return 1e-5 if dtype in (torch.float32, torch.float64) else 1e-2


# --- gather: a sequence's K/V out of the pool, in logical token order -------------------------------------------------
def gather_kv_loop(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
                   context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The teaching loop, one token at a time, exactly the address chain. Unchecked (gather_kv checks).
    Returns keys, values [context_len, num_kv_heads, head_dim] in logical token order."""
    block_size = key_cache.shape[1]
    keys, values = [], []
    for token_index in range(context_len):
        logical_block_id = token_index // block_size
        block_offset = token_index % block_size
        physical_block_id = int(block_table[logical_block_id])
        keys.append(key_cache[physical_block_id, block_offset])
        values.append(value_cache[physical_block_id, block_offset])
    return torch.stack(keys), torch.stack(values)


def _gather(key_cache, value_cache, block_table, context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """gather_kv without its checks: every token's slot at once, read from the pool as [num_slots, kv, head_dim]."""
    slots = slot_mapping(block_table, 0, context_len, key_cache.shape[1], device=key_cache.device)
    return key_cache.flatten(0, 1)[slots], value_cache.flatten(0, 1)[slots]


def gather_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
              context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Same result as `gather_kv_loop`, with no Python loop over tokens (slot_mapping gives every token's slot).
    Raises ValueError unless the caches are [num_blocks, block_size, num_kv_heads, head_dim] (sizes >= 1),
    context_len is an integer >= 1 and the table's first ceil(context_len / block_size) entries are integers in
    [0, num_blocks). A block may appear twice (the bug lab reads aliased tables on purpose)."""
    check_cache(key_cache, value_cache)
    context_len = as_int(context_len, "context_len", 1)
    validate_block_table(block_table, key_cache.shape[0], key_cache.shape[1], context_len, distinct=False)
    return _gather(key_cache, value_cache, block_table, context_len)


# --- attention: the math PagedAttention leaves unchanged --------------------------------------------------------------
def causal_mask(q_len: int, context_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """bool [q_len, context_len], True where a query may see a key. The q_len queries are the context's last tokens
    (a prompt chunk after cached ones, or a whole prompt): query i is token context_len - q_len + i and sees keys
    0 … context_len - q_len + i. The library's one definition of it. Raises ValueError unless 0 <= q_len <=
    context_len (integers)."""
    q_len, context_len = as_int(q_len, "q_len", 0), as_int(context_len, "context_len", 0)
    if q_len > context_len:
        raise ValueError(f"q_len ({q_len}) cannot exceed context_len ({context_len})")
    return (torch.arange(context_len, device=device)[None, :]
            <= torch.arange(q_len, device=device)[:, None] + (context_len - q_len))


def attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float | None = None,
              causal: bool = False) -> torch.Tensor:
    """softmax(Q·Kᵀ·scale)·V per head, with grouped-query attention: query head h reads kv head
    h // (num_heads // num_kv_heads). query: decode [num_heads, head_dim] or prefill [q_len, num_heads, head_dim];
    keys, values [context_len, num_kv_heads, head_dim]. causal=True: `causal_mask`. Computed in float32 (float64
    stays float64), returned in the query's dtype. Raises ValueError (attention_checks) for other shapes, a size of
    0, num_heads not a multiple of num_kv_heads, non-floating dtypes, mixed devices, or a scale not finite and > 0.
    """
    check_attention_inputs(query, keys, values)
    q = query.unsqueeze(0) if query.dim() == 2 else query  # [q_len, num_heads, head_dim]
    q_len, num_heads, head_dim = q.shape
    context_len, num_kv_heads = keys.shape[0], keys.shape[1]
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    group = num_heads // num_kv_heads
    k = keys.to(compute).repeat_interleave(group, dim=1)  # [context_len, num_heads, head_dim]
    v = values.to(compute).repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.to(compute), k) * check_scale(scale, head_dim)  # [heads, q_len, ctx]
    if causal:
        scores = scores.masked_fill(~causal_mask(q_len, context_len, q.device), float("-inf"))
    out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v).to(query.dtype)
    return out[0] if query.dim() == 2 else out


def attention_sdpa(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float | None = None,
                   causal: bool = False) -> torch.Tensor:
    """`attention` in one torch SDPA call: the same math, inputs, shapes, dtypes and ValueErrors (about 2-3x faster
    per sequence on CPU; paged_attention_prefill's). The mask, when causal, is `causal_mask`, or SDPA's own
    is_causal when q_len == context_len (the same mask there); grouped heads go to SDPA's enable_gqa. `attention`
    stays the reference: the contiguous twin runs it, so the twins check this one."""
    check_attention_inputs(query, keys, values)
    q = query.unsqueeze(0) if query.dim() == 2 else query  # [q_len, num_heads, head_dim]
    q_len, context_len = q.shape[0], keys.shape[0]
    scale = check_scale(scale, q.shape[2])
    square = causal and q_len == context_len  # the whole context fed: is_causal is that mask
    mask = causal_mask(q_len, context_len, q.device) if causal and not square else None  # raises as the reference
    if q_len == 0:  # nothing to attend: an empty result, as the reference gives
        return query.new_empty(query.shape)
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    # [1, heads, tokens, head_dim]: with a batch dimension torch takes its fused CPU kernel
    out = F.scaled_dot_product_attention(*(x.to(compute).transpose(0, 1)[None] for x in (q, keys, values)),
                                         attn_mask=mask, is_causal=square, scale=scale, enable_gqa=True)
    out = out[0].transpose(0, 1).to(query.dtype)
    return out[0] if query.dim() == 2 else out


def attention_weights(query: torch.Tensor, keys: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Decode attention weights [num_heads, context_len] (for figures), same GQA rule as `attention`.
    query [num_heads, head_dim]; keys [context_len, num_kv_heads, head_dim]. Raises ValueError as `attention`."""
    check_attention_inputs(query, keys, keys)
    if query.dim() != 2:
        raise ValueError(f"query must be [num_heads, head_dim] (one decode step), got {tuple(query.shape)}")
    k = keys.float().repeat_interleave(query.shape[0] // keys.shape[1], dim=1)
    return torch.softmax(torch.einsum("hd,khd->hk", query.float(), k) * check_scale(scale, query.shape[1]), dim=-1)


def contiguous_attention_decode(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, context_lens,
                                scale: float | None = None) -> torch.Tensor:
    """The reference: decode attention over contiguous K/V [B, max_ctx, num_kv_heads, head_dim], sequence b using
    its first context_lens[b] tokens. Returns [B, num_heads, head_dim]."""
    lens = [int(n) for n in torch.as_tensor(context_lens).reshape(-1).tolist()]
    return torch.stack([attention(query[b], keys[b, :n], values[b, :n], scale) for b, n in enumerate(lens)])


# --- paged attention over a batch: decode (one new token each) and prefill (a prompt or chunk each) -------------------
def _decode_loop(query, key_cache, value_cache, block_tables, context_lens, scale):
    """impl="loop": the seed's per-token loop for each sequence, then plain attention."""
    tables, lens = block_tables.tolist(), context_lens.tolist()
    return torch.stack([attention(query[b], *gather_kv_loop(key_cache, value_cache, tables[b], lens[b]), scale)
                        for b in range(query.shape[0])])


def _decode_gather(query, key_cache, value_cache, block_tables, context_lens, scale):
    """impl="gather": every sequence's whole blocks in one index_select, then one masked SDPA call for the batch."""
    batch, max_ctx = query.shape[0], int(context_lens.max())
    _, block_size, num_kv_heads, head_dim = key_cache.shape
    used = blocks_needed(max_ctx, block_size)  # logical blocks read per sequence
    tables = block_tables.long()
    if used > tables.shape[1]:  # a context_len past its table (only unvalidated): re-read the table's last entry
        tables = torch.cat([tables, tables[:, -1:].expand(batch, used - tables.shape[1])], dim=1)
    in_use = torch.arange(used, device=query.device)[None, :] * block_size < context_lens[:, None]  # [B, used]
    tables = torch.where(in_use, tables[:, :used], 0)  # past a sequence's own blocks: block 0, masked anyway
    shape, blocks = (batch, used * block_size, num_kv_heads, head_dim), tables.reshape(-1)
    # whole blocks, each one row of the pool viewed as [num_blocks, block_size * num_kv_heads * head_dim]
    keys = key_cache.reshape(key_cache.shape[0], -1).index_select(0, blocks).view(shape)[:, :max_ctx]
    values = value_cache.reshape(value_cache.shape[0], -1).index_select(0, blocks).view(shape)[:, :max_ctx]
    valid = torch.arange(max_ctx, device=query.device)[None, :] < context_lens[:, None]  # [B, max_ctx]
    out = F.scaled_dot_product_attention(query.unsqueeze(2), keys.transpose(1, 2), values.transpose(1, 2),
                                         attn_mask=None if bool(valid.all()) else valid[:, None, None, :],
                                         scale=scale, enable_gqa=query.shape[1] != num_kv_heads)
    return out.squeeze(2)


register_decode_impl("loop", _decode_loop)
register_decode_impl("gather", _decode_gather)


def paged_attention_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables,
                           context_lens, scale: float | None = None, impl: str = "gather",
                           validate: bool = True) -> torch.Tensor:
    """Decode attention for a batch, reading each sequence's history through its block table. query [B, num_heads,
    head_dim]; block_tables int [B, max_blocks], -1 padded (or a list of lists); context_lens int [B], each >= 1.
    Returns [B, num_heads, head_dim] in the query's dtype. impl: "loop" (the seed's loop), "gather" (vectorised) or a
    kernel of paged/kernels ("fused", "native", "triton"). Raises ValueError for an unknown impl, a bad scale and
    (validate=True) every rule of `check_decode_inputs`; validate=False (the engine's calls) skips them."""
    fn = decode_impl(impl)
    if validate:
        block_tables, context_lens = check_decode_inputs(query, key_cache, value_cache, block_tables, context_lens)
    else:  # unchecked; lists (the bug lab's) or tensors elsewhere become tensors on the cache's device
        device = key_cache.device
        if not isinstance(block_tables, torch.Tensor) or block_tables.device != device:
            block_tables = (block_tables if isinstance(block_tables, torch.Tensor)
                            else pad_block_tables(block_tables)).to(device)
        if not isinstance(context_lens, torch.Tensor) or context_lens.dtype != torch.long or \
                context_lens.device != device:
            context_lens = torch.as_tensor(context_lens, device=device).long()
    scale = check_scale(scale, query.shape[-1])
    if query.shape[0] == 0:  # nothing to attend: the same empty answer whichever impl was asked for
        return query.new_empty(query.shape)
    out = fn(query, key_cache, value_cache, block_tables, context_lens, scale)
    return out if out.dtype == query.dtype else out.to(query.dtype)


def paged_attention_prefill(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables,
                            context_lens, query_lens, scale: float | None = None, impl: str = "gather",
                            validate: bool = True) -> torch.Tensor:
    """Prefill attention for a batch: sequence b's query_lens[b] newest tokens (its rows of query, back to back)
    attend causally to its first context_lens[b] tokens, read through its block table (a whole prompt, a chunk
    after cached tokens and a one-token decode alike). query [N, num_heads, head_dim], N = sum(query_lens);
    1 <= query_lens[b] <= context_lens[b]. Returns [N, num_heads, head_dim] in the query's dtype. impl "loop":
    gather_kv_loop then `attention`; any other: slot_mapping then `attention_sdpa`. Raises ValueError for an unknown
    impl and (validate=True) `check_prefill_inputs`'s rules; validate=False: tables and lengths as lists of ints."""
    decode_impl(impl)  # an unknown impl is refused before anything runs
    if validate:
        block_tables, context_lens, query_lens = check_prefill_inputs(query, key_cache, value_cache, block_tables,
                                                                      context_lens, query_lens)
    gather, attend = (gather_kv_loop, attention) if impl == "loop" else (_gather, attention_sdpa)
    out, start = [], 0
    for table, context_len, n in zip(block_tables, context_lens, query_lens):
        keys, values = gather(key_cache, value_cache, table, context_len)  # [context_len, num_kv_heads, head_dim]
        out.append(attend(query[start:start + n], keys, values, scale=scale, causal=True))
        start += n
    return torch.cat(out) if out else query.new_empty(query.shape)
