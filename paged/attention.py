"""Gather-then-attend: PagedAttention's teaching kernel, and the two calls every engine step makes.
Attention's math is unchanged; only where K/V come from differs. The fast kernels sit behind impl.

    key_cache, value_cache  [num_blocks, block_size, num_kv_heads, head_dim]
    block_tables [B, max_blocks] int, -1 padded;  context_lens [B]: tokens each sequence reads
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .addressing import slot_mapping
from .attention_checks import (check_attention_inputs, check_decode_inputs, check_gather,
                               check_impl, check_mask_lens, check_prefill_inputs, check_scale,
                               decode_tensors, tolerance)  # noqa: F401 (tolerance: re-exported)
from .kernels import DecodeStep, fused_decode, gather_decode, native_decode, triton_kernel

KV = tuple[torch.Tensor, torch.Tensor]  # keys, values


# --- gather: a sequence's K/V out of the pool, in logical token order ----------------------------
def gather_kv_loop(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
                   context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The article's loop, unchecked: keys, values [context_len, num_kv_heads, head_dim]."""
    block_size = key_cache.shape[1]
    keys = []
    values = []
    for token_index in range(context_len):
        logical_block_id = token_index // block_size
        block_offset = token_index % block_size
        physical_block_id = int(block_table[logical_block_id])
        k = key_cache[physical_block_id, block_offset]
        v = value_cache[physical_block_id, block_offset]
        keys.append(k)
        values.append(v)
    return torch.stack(keys), torch.stack(values)


def _gather(key_cache, value_cache, block_table, context_len: int) -> KV:
    """gather_kv unchecked: every token's slot at once."""
    slots = slot_mapping(block_table, 0, context_len, key_cache.shape[1], device=key_cache.device)
    return key_cache.flatten(0, 1)[slots], value_cache.flatten(0, 1)[slots]


def gather_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
              context_len: int) -> KV:
    """`gather_kv_loop` without the loop: keys, values [context_len, num_kv_heads, head_dim].
    Raises: ValueError for bad caches, context_len < 1, a used entry outside [0, num_blocks)."""
    context_len = check_gather(key_cache, value_cache, block_table, context_len)  # repeats: ok
    return _gather(key_cache, value_cache, block_table, context_len)


# --- attention: the math PagedAttention leaves unchanged -----------------------------------------
def causal_mask(q_len: int, context_len: int,
                device: torch.device | str | None = None) -> torch.Tensor:
    """bool [q_len, context_len]: query i (of the last q_len) sees keys 0 … ctx - q_len + i.
    Raises: ValueError unless 0 <= q_len <= context_len."""
    q_len, context_len = check_mask_lens(q_len, context_len)
    return (torch.arange(context_len, device=device)[None, :]
            <= torch.arange(q_len, device=device)[:, None] + (context_len - q_len))


def attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              scale: float | None = None, causal: bool = False) -> torch.Tensor:
    """softmax(Q·Kᵀ·scale)·V (GQA): query [num_heads, head_dim] or [q_len, num_heads,
    head_dim], keys, values [ctx, num_kv_heads, head_dim] -> query's shape and dtype.
    Raises: ValueError for shapes that disagree or a bad scale."""
    q, scale = check_attention_inputs(query, keys, values, scale)  # q [q_len, num_heads, head_dim]
    q_len, num_heads, head_dim = q.shape
    context_len, num_kv_heads = keys.shape[0], keys.shape[1]
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    group = num_heads // num_kv_heads
    k = keys.to(compute).repeat_interleave(group, dim=1)  # [context_len, num_heads, head_dim]
    v = values.to(compute).repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.to(compute), k) * scale  # [heads, q_len, ctx]
    if causal:
        scores = scores.masked_fill(~causal_mask(q_len, context_len, q.device), float("-inf"))
    out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v).to(query.dtype)
    return out[0] if query.dim() == 2 else out


def attention_sdpa(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                   scale: float | None = None, causal: bool = False) -> torch.Tensor:
    """`attention` in one torch SDPA call (prefill's); `attention` stays the reference.
    Raises: ValueError as `attention`."""
    q, scale = check_attention_inputs(query, keys, values, scale)  # q [q_len, num_heads, head_dim]
    q_len, context_len = q.shape[0], keys.shape[0]
    square = causal and q_len == context_len  # the whole context fed: is_causal is that mask
    mask = causal_mask(q_len, context_len, q.device) if causal and not square else None
    if q_len == 0:  # nothing to attend: an empty result, as the reference gives
        return query.new_empty(query.shape)
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    # [1, heads, tokens, head_dim]: with a batch dimension torch takes its fused CPU kernel
    q, k, v = (x.to(compute).transpose(0, 1)[None] for x in (q, keys, values))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=square, scale=scale,
                                         enable_gqa=True)
    out = out[0].transpose(0, 1).to(query.dtype)
    return out[0] if query.dim() == 2 else out


def attention_weights(query: torch.Tensor, keys: torch.Tensor,
                      scale: float | None = None) -> torch.Tensor:
    """Decode weights [num_heads, context_len] (figures): query [num_heads, head_dim].
    Raises: ValueError as `attention`, or for a query of more than one step."""
    _, scale = check_attention_inputs(query, keys, keys, scale, one_step=True)
    k = keys.float().repeat_interleave(query.shape[0] // keys.shape[1], dim=1)
    scores = torch.einsum("hd,khd->hk", query.float(), k) * scale
    return torch.softmax(scores, dim=-1)


def contiguous_attention_decode(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                                context_lens, scale: float | None = None) -> torch.Tensor:
    """The reference decode over keys, values [B, max_ctx, num_kv_heads, head_dim], row b
    reading context_lens[b] -> [B, num_heads, head_dim]. Raises: ValueError as `attention`."""
    lens = [int(n) for n in torch.as_tensor(context_lens).reshape(-1).tolist()]
    return torch.stack([attention(query[b], keys[b, :n], values[b, :n], scale)
                        for b, n in enumerate(lens)])


# --- paged attention over a batch: decode (one new token each), prefill (a prompt or chunk each) --
def decode_loop(query, key_cache, value_cache, block_tables, context_lens, scale) -> torch.Tensor:
    """impl="loop": the seed's per-token loop for each sequence, then plain attention."""
    tables, lens = block_tables.tolist(), context_lens.tolist()
    return torch.stack([attention(q, *gather_kv_loop(key_cache, value_cache, tables[b], lens[b]),
                                  scale) for b, q in enumerate(query)])


# Every impl, slowest first: fn(query, key_cache, value_cache, block_tables, context_lens, scale).
DECODE_IMPLS = {"loop": decode_loop, "gather": gather_decode, "fused": fused_decode,
                "native": native_decode, "triton": triton_kernel}


def paged_attention_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_tables, context_lens, scale: float | None = None,
                           impl: str = "gather", validate: bool = True,
                           step: DecodeStep | None = None) -> torch.Tensor:
    """Decode attention through block tables: query [B, num_heads, head_dim] -> the same shape.
    impl: a name of DECODE_IMPLS; step: the engine's native plan of this batch (per step).
    Raises: ValueError for an unknown impl, a bad scale, (validate) check_decode_inputs' rules."""
    fn = DECODE_IMPLS[check_impl(impl, DECODE_IMPLS)]
    if impl == "native" and step is not None:  # the C kernel, tables and lens planned per step
        return step.attend(query, key_cache, value_cache)
    prepare = check_decode_inputs if validate else decode_tensors  # tensors on the cache's device
    block_tables, context_lens = prepare(query, key_cache, value_cache, block_tables, context_lens)
    scale = check_scale(scale, query.shape[-1])
    if query.shape[0] == 0:  # nothing to attend: the same empty answer whichever impl
        return query.new_empty(query.shape)
    out = fn(query, key_cache, value_cache, block_tables, context_lens, scale)
    return out if out.dtype == query.dtype else out.to(query.dtype)


def paged_attention_prefill(query: torch.Tensor, key_cache: torch.Tensor,
                            value_cache: torch.Tensor, block_tables, context_lens, query_lens,
                            scale: float | None = None, impl: str = "gather",
                            validate: bool = True) -> torch.Tensor:
    """Causal attention of each sequence's query_lens[b] newest tokens (rows back to back) over
    its context_lens[b]: query [N, num_heads, head_dim] -> the same shape ("loop": gather_kv_loop).
    Raises: ValueError for an unknown impl, (validate) check_prefill_inputs' rules."""
    check_impl(impl, DECODE_IMPLS)  # an unknown impl is refused before anything runs
    if validate:
        block_tables, context_lens, query_lens = check_prefill_inputs(
            query, key_cache, value_cache, block_tables, context_lens, query_lens)
    gather, attend = (gather_kv_loop, attention) if impl == "loop" else (_gather, attention_sdpa)
    out, start = [], 0
    for table, context_len, n in zip(block_tables, context_lens, query_lens):
        keys, values = gather(key_cache, value_cache, table, context_len)  # [ctx, kv heads, dim]
        out.append(attend(query[start:start + n], keys, values, scale=scale, causal=True))
        start += n
    return torch.cat(out) if out else query.new_empty(query.shape)
