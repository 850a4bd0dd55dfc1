"""The K/V write: each token's key and value go to its slot in the pool.
K/V 写入：每个 token 的 key 和 value 写进它在池中的 slot。

    key_cache, value_cache  [num_blocks, block_size, num_kv_heads, head_dim]   (one layer / 一层)
    key, value              [num_tokens, num_kv_heads, head_dim]
    slot_mapping            [num_tokens] int: physical_block_id * block_size + block_offset;
                            -1 = no slot, skip / 没有 slot，跳过
"""

from __future__ import annotations

import torch


def write_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor,
             value: torch.Tensor, slot_mapping: torch.Tensor, validate: bool = True,
             pads: bool = True, fast: bool = False) -> None:
    """Write token i's K/V at slot slot_mapping[i], in place; a slot of -1 (padding) is skipped.
    把第 i 个 token 的 K/V 原地写到 slot_mapping[i]；slot 为 -1（padding）时跳过。
    validate / pads / fast: the library's switches; these exercises never change them.
    validate / pads / fast：库里的开关，练习中不用改。"""
    # > block_size = key_cache.shape[1]
    # > for i, slot in enumerate(slot_mapping.tolist()):
    # >     if slot == -1: continue                      # padding: no slot / padding：没有 slot，跳过
    # >     physical_block_id, block_offset = divmod(slot, block_size)
    # >     key_cache[physical_block_id, block_offset] = key[i]  # and the same for value / value 同理
    block_size = key_cache.shape[1]
    for i, slot in enumerate(slot_mapping.tolist()):
        if slot == -1:
            continue
        physical_block_id, block_offset = divmod(slot, block_size)
        key_cache[physical_block_id, block_offset] = key[i]
        value_cache[physical_block_id, block_offset] = value[i]
