"""Gather, then attend: the teaching PagedAttention. 先 gather 再 attention：教学版 PagedAttention。

    key_cache, value_cache  [num_blocks, block_size, num_kv_heads, head_dim]   (one layer / 一层)
    block_table             one sequence's list of physical block ids / 一个序列的 physical block 列表
    keys, values            [context_len, num_kv_heads, head_dim], in logical token order / 按逻辑顺序
"""

from __future__ import annotations

import torch

from addressing import slot_mapping
from paged.attention import causal_mask  # given: bool [q_len, context_len], True: may look


def gather_kv_loop(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
                   context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One token at a time along the address chain -> keys, values [context_len, num_kv_heads,
    head_dim].
    逐个 token 沿地址链读取。"""
    # > block_size = key_cache.shape[1]
    # > for token_index in range(context_len):
    # >     logical_block_id = token_index // block_size;  block_offset = token_index % block_size
    # >     physical_block_id = block_table[logical_block_id]
    # >     keys.append(key_cache[physical_block_id, block_offset])    # values likewise / values 同理
    # > return torch.stack(keys), torch.stack(values)
    block_size = key_cache.shape[1]
    keys, values = [], []
    for token_index in range(context_len):
        logical_block_id, block_offset = divmod(token_index, block_size)
        physical_block_id = int(block_table[logical_block_id])
        keys.append(key_cache[physical_block_id, block_offset])
        values.append(value_cache[physical_block_id, block_offset])
    return torch.stack(keys), torch.stack(values)


def gather_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
              context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """gather_kv_loop without the Python loop: every slot at once. 去掉 Python 循环：一次取出所有 slot。"""
    # > slots = slot_mapping(block_table, 0, context_len, block_size)          # [context_len]
    # > flat_k = key_cache.flatten(0, 1)  # [num_blocks * block_size, ...]: row number = slot
    # > return flat_k[slots], flat_v[slots]
    slots = slot_mapping(block_table, 0, context_len, key_cache.shape[1], device=key_cache.device)
    return key_cache.flatten(0, 1)[slots], value_cache.flatten(0, 1)[slots]


def attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              scale: float | None = None, causal: bool = False) -> torch.Tensor:
    """softmax(Q·Kᵀ·scale)·V per head. query [num_heads, head_dim] (decode) or [q_len, num_heads,
    head_dim]; keys, values [context_len, num_kv_heads, head_dim]; query head h reads kv head
    h // (num_heads // num_kv_heads). causal: query i of q_len sees keys
    0 .. context_len - q_len + i (causal_mask).
    每个 head 算 softmax(Q·Kᵀ·scale)·V；GQA：query head h 读 kv head h // (num_heads // num_kv_heads)。"""
    # > scale = scale or head_dim ** -0.5
    # > k = keys.repeat_interleave(num_heads // num_kv_heads, dim=1)  # [ctx, num_heads, head_dim]
    # > scores = einsum("qhd,khd->hqk", q, k) * scale                  # [num_heads, q_len, ctx]
    # > causal: scores.masked_fill(~causal_mask(q_len, context_len), -inf)
    # > out = einsum("hqk,khd->qhd", softmax(scores, -1), v)  # shaped as query / 与 query 同形
    q = query.unsqueeze(0) if query.dim() == 2 else query  # [q_len, num_heads, head_dim]
    q_len, num_heads, head_dim = q.shape
    scale = head_dim ** -0.5 if scale is None else scale
    group = num_heads // keys.shape[1]
    k = keys.float().repeat_interleave(group, dim=1)
    v = values.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
    if causal:
        scores = scores.masked_fill(~causal_mask(q_len, keys.shape[0], q.device), float("-inf"))
    out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v).to(query.dtype)
    return out[0] if query.dim() == 2 else out


def paged_attention_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                           block_tables, context_lens, scale: float | None = None,
                           impl: str = "gather", validate: bool = True,
                           step=None) -> torch.Tensor:
    """Decode for a batch: row b gathers its first context_lens[b] tokens through block_tables[b]
    (-1 padded), then attends with query[b].
    query [B, num_heads, head_dim] -> [B, num_heads, head_dim].
    impl / validate / step: the library's switches; unused here. 库里的开关，这里不用。
    批量 decode：第 b 行按 block_tables[b] gather 前 context_lens[b] 个 token，再用 query[b] 做 attention。"""
    # > for b in range(B):
    # >     keys, values = gather_kv(key_cache, value_cache, block_tables[b], context_lens[b])
    # >     out.append(attention(query[b], keys, values, scale))
    # > return torch.stack(out)
    tables, lens = torch.as_tensor(block_tables).tolist(), torch.as_tensor(context_lens).tolist()
    out = [attention(query[b], *gather_kv(key_cache, value_cache, tables[b], lens[b]), scale)
           for b in range(query.shape[0])]
    return torch.stack(out)
