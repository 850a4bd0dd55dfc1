"""The address chain: where token `token_index` of a sequence lives in the paged pool.
地址链：一个序列的第 token_index 个 token 在分页 KV 池中的位置。

    logical_block_id  = token_index // block_size
    physical_block_id = block_table[logical_block_id]
    block_offset      = token_index %  block_size
    slot              = physical_block_id * block_size + block_offset
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Address:
    """Every link of the chain for one token (given, not an exercise).
    一个 token 的整条地址链（已给出）。"""

    token_index: int
    logical_block_id: int
    physical_block_id: int
    block_offset: int
    slot: int


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """How many blocks hold num_tokens tokens (round up).
    容纳 num_tokens 个 token 需要几个 block（向上取整）。"""
    # > full, rest = divmod(num_tokens, block_size)
    # > return full + (1 if rest else 0)        # 0 tokens -> 0 blocks; 5 tokens, block_size 4 -> 2
    full, rest = divmod(num_tokens, block_size)
    return full + (1 if rest else 0)


def logical_address(token_index: int, block_size: int) -> tuple[int, int]:
    """(logical_block_id, block_offset) of a token: no block table needed. 不需要 block table 的两环。"""
    # > logical_block_id = token_index // block_size
    # > block_offset     = token_index %  block_size
    # > return logical_block_id, block_offset
    return token_index // block_size, token_index % block_size


def locate(token_index: int, block_table, block_size: int) -> Address:
    """Follow the whole chain for one token -> Address. 沿整条地址链走一遍，返回 Address。"""
    # > logical_block_id, block_offset = logical_address(token_index, block_size)
    # > physical_block_id = int(block_table[logical_block_id])
    # > slot = physical_block_id * block_size + block_offset
    # > return Address(token_index, logical_block_id, physical_block_id, block_offset, slot)
    logical_block_id, block_offset = logical_address(token_index, block_size)
    physical_block_id = int(block_table[logical_block_id])
    slot = physical_block_id * block_size + block_offset
    return Address(token_index, logical_block_id, physical_block_id, block_offset, slot)


def slot_mapping(block_table, start: int, end: int, block_size: int, device=None) -> torch.Tensor:
    """Slots of tokens [start, end) of one sequence: LongTensor [end - start].
    一个序列第 start..end-1 个 token 的 slot。"""
    # > for token_index in range(start, end): slot of that token (locate(...).slot)
    # > 对 range(start, end) 中每个 token_index，取它的 slot
    # > return torch.tensor(slots, dtype=torch.long, device=device)
    slots = [locate(i, block_table, block_size).slot for i in range(start, end)]
    return torch.tensor(slots, dtype=torch.long, device=device)
