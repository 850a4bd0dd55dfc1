"""Sliding-window attention: a token attends to itself and the W - 1 tokens before it, no older.

    the query at position p reads the keys  window_start(p, W) = max(0, p - W + 1)  …  p

That is transformers 5.19's Mistral / Qwen2 mask (`kv_idx > q_idx - sliding_window`, and causal)
and vLLM's (`get_num_skipped_tokens`). For the block table: once the next token to compute is token
n (its cached_token_count), no query reads a token before n - W + 1 again, so every block wholly
before that point can go back to the free queue while the sequence runs. The table keeps its length
(logical block i still starts at token i * block_size: the address chain is unchanged); the freed
entries become holes, HOLE = -1, always at the front (vLLM writes its null block there).
paged/engine/window_blocks.py frees them; paged/engine/windowing.py runs the engine with a window.
This file is the math: masks, the contiguous reference and the paged reads, which touch only the
window's own blocks, never a hole.

Shapes as in paged/attention.py: key_cache, value_cache [num_blocks, block_size, num_kv_heads,
head_dim].
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..addressing import slot_mapping
from ..attention_checks import check_scale
from ..checks import as_int

HOLE = -1  # a block-table entry freed because the window slid past it (vLLM: its null block)


def window_start(position: int, window: int) -> int:
    """The first token a query at `position` reads with window W: max(0, position - W + 1)."""
    return max(0, position - window + 1)


def num_skipped_tokens(num_computed_tokens: int, window: int) -> int:
    """Tokens the next token (index num_computed_tokens) no longer reads: vLLM's function."""
    return max(0, num_computed_tokens - window + 1)


def num_skipped_blocks(num_computed_tokens: int, window: int, block_size: int) -> int:
    """Leading logical blocks wholly before token num_computed_tokens' window: free to release."""
    return num_skipped_tokens(num_computed_tokens, window) // block_size


def max_blocks_held(window: int, block_size: int) -> int:
    """The most blocks a decoding sequence holds with window W: ceil(W / block_size) + 1, as the W
    tokens may straddle one block more (a prompt fed in one step holds all its blocks that step).
    Raises: ValueError unless window, block_size >= 1."""
    window, block_size = as_int(window, "sliding_window", 1), as_int(block_size, "block_size", 1)
    return math.ceil(window / block_size) + 1


def window_mask(q_len: int, context_len: int, window: int, start: int = 0,
                device: torch.device | str | None = None) -> torch.Tensor:
    """bool [q_len, context_len - start], True where a query may read a key: queries are the last
    q_len tokens (query i at context_len - q_len + i), keys the tokens start … context_len - 1.
    Raises: ValueError unless 0 <= start <= context_len - q_len, q_len >= 0 and window >= 1."""
    window = as_int(window, "sliding_window", 1)
    q_len, context_len = as_int(q_len, "q_len", 0), as_int(context_len, "context_len", 0)
    start = as_int(start, "start", 0, max(0, context_len - q_len))
    if q_len > context_len:
        raise ValueError(f"q_len ({q_len}) must be <= context_len ({context_len})")
    pos = torch.arange(context_len - q_len, context_len, device=device)[:, None]  # [q_len, 1]
    key = torch.arange(start, context_len, device=device)[None, :]  # [1, keys]
    return (key <= pos) & (key > pos - window)


def window_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, window: int,
                     scale: float | None = None, start: int = 0) -> torch.Tensor:
    """The reference: softmax(Q·Kᵀ·scale + window mask)·V, GQA as paged.attention.attention.
    query [num_heads, head_dim] or [q_len, num_heads, head_dim] (the last q_len tokens); keys,
    values [context_len - start, num_kv_heads, head_dim] (tokens start …); float32 math (float64
    stays), the query's dtype out.
    Raises: ValueError for keys / values of another shape or heads that do not group."""
    q = query.unsqueeze(0) if query.dim() == 2 else query  # [q_len, num_heads, head_dim]
    q_len, num_heads, head_dim = q.shape
    if keys.dim() != 3 or keys.shape != values.shape or num_heads % keys.shape[1]:
        raise ValueError(f"keys/values must be [tokens, num_kv_heads, head_dim] with num_heads "
                         f"({num_heads}) a multiple of num_kv_heads, got {tuple(keys.shape)} and "
                         f"{tuple(values.shape)}")
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    group = num_heads // keys.shape[1]
    k = keys.to(compute).repeat_interleave(group, dim=1)  # [keys, num_heads, head_dim]
    v = values.to(compute).repeat_interleave(group, dim=1)
    # [heads, q_len, keys]
    scores = torch.einsum("qhd,khd->hqk", q.to(compute), k) * check_scale(scale, head_dim)
    mask = window_mask(q_len, start + keys.shape[0], window, start, q.device)
    out = torch.einsum("hqk,khd->qhd",
                       torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1), v)
    out = out.to(query.dtype)
    return out[0] if query.dim() == 2 else out


def gather_window_loop(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
                       start: int, context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The teaching loop from the window's first token: keys, values [context_len - start, K, D],
    tokens start … context_len - 1 one at a time through the table (holes before start unread).
    Raises: ValueError if a token inside the window sits in a hole."""
    block_size = key_cache.shape[1]
    keys, values = [], []
    for token_index in range(start, context_len):
        physical_block_id = int(block_table[token_index // block_size])
        if physical_block_id < 0:
            raise ValueError(f"token {token_index} is inside the window but its block is a hole: "
                             "freed too early")
        keys.append(key_cache[physical_block_id, token_index % block_size])
        values.append(value_cache[physical_block_id, token_index % block_size])
    return torch.stack(keys), torch.stack(values)


def gather_window(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table, start: int,
                  context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`gather_window_loop` at once: slot_mapping of tokens start … context_len - 1, one index.
    Raises: ValueError (slot_mapping's) for a hole among them."""
    slots = slot_mapping(block_table, start, context_len, key_cache.shape[1],
                         device=key_cache.device)
    return key_cache.flatten(0, 1)[slots], value_cache.flatten(0, 1)[slots]


def paged_window_prefill(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                         block_tables, context_lens, query_lens, window: int,
                         scale: float | None = None, impl: str = "gather") -> torch.Tensor:
    """paged_attention_prefill with a window: query [N, num_heads, head_dim] -> the same shape.
    Sequence b's query_lens[b] newest rows read, through its table, only what their windows cover
    (from window_start(first query) on). impl "loop": the per-token loop; "gather": slot_mapping.
    Raises: ValueError if a token inside a window sits in a hole."""
    gather = gather_window_loop if impl == "loop" else gather_window
    out, at = [], 0
    for table, context_len, n in zip(block_tables, context_lens, query_lens):
        start = window_start(int(context_len) - n, window)
        keys, values = gather(key_cache, value_cache, table, start, int(context_len))
        out.append(window_attention(query[at:at + n], keys, values, window, scale, start))
        at += n
    return torch.cat(out) if out else query.new_empty(query.shape)


def paged_window_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                        block_tables: torch.Tensor, context_lens: torch.Tensor, window: int,
                        scale: float | None = None) -> torch.Tensor:
    """Windowed decode of a batch: query [B, num_heads, head_dim] -> the same shape; sequence b's
    newest token reads its last min(W, context_len) tokens only. block_tables int [B, max_blocks]
    (holes and padding -1), context_lens int [B]; slots from the table ([B, ≤ W] token indexes ->
    blocks -> slots), one gather, then SDPA with the short rows masked.
    Raises: ValueError if a token inside a window sits in a hole."""
    block_size = key_cache.shape[1]
    lens = context_lens.to(torch.long)
    starts = (lens - window).clamp_min(0)  # [B] window_start of each newest token
    width = int((lens - starts).max())
    offset = torch.arange(width, device=lens.device)[None, :]  # [1, width]
    valid = offset < (lens - starts)[:, None]  # [B, width]
    # [B, width]: padding reads the first
    token = torch.where(valid, starts[:, None] + offset, starts[:, None])
    physical = block_tables.long().gather(1, token // block_size)  # [B, width]
    if bool((physical < 0).any()):
        raise ValueError("a token inside a sliding window sits in a hole of its block table: a "
                         "block was freed while its window still reads it")
    slots = physical * block_size + token % block_size
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    k = key_cache.flatten(0, 1)[slots].to(compute).transpose(1, 2)  # [B, kv_heads, width, head_dim]
    v = value_cache.flatten(0, 1)[slots].to(compute).transpose(1, 2)
    out = F.scaled_dot_product_attention(query.to(compute)[:, :, None], k, v,
                                         attn_mask=valid[:, None, None, :],
                                         scale=check_scale(scale, query.shape[-1]),
                                         enable_gqa=True)
    return out[:, :, 0].to(query.dtype)  # [B, num_heads, head_dim]


def windowed_rows(window: int | None):
    """TinyLlama without a cache ([B, T] rows from position 0): a backend(layer, q, k, v), causal
    with the window in each row, q [B, T, H, D], k, v [B, T, K, D]; None without a window."""
    if window is None:
        return None

    def backend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        mask = window_mask(q.shape[1], q.shape[1], window, device=q.device)  # [T, T]
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                             v.transpose(1, 2), attn_mask=mask, enable_gqa=True)
        return out.transpose(1, 2)

    return backend
