"""The block manager: free blocks, and each sequence's block table.
Block Manager：管理空闲 block，以及每个序列的 block table。

allocate gives a prompt its blocks (prefill); append_slot finds the slot of the next token (decode),
taking a new block only when the last one is full; free gives a finished sequence's blocks back.
allocate 为 prompt 分配 block（prefill）；append_slot 给出下一个 token 的 slot（decode），最后一个 block 满了才
拿新 block；free 归还已结束序列的 block。
"""

from __future__ import annotations

import random
from collections import deque

from addressing import blocks_needed, locate


class BlockManager:
    """Free blocks of a pool of num_blocks blocks of block_size slots. watermark and
    enable_prefix_caching: the library's knobs, unused in these exercises. seed: shuffle the free
    blocks (scattered tables, as in the app).
    num_blocks 个 block 的空闲队列。watermark、enable_prefix_caching 在练习中不用；seed 打乱空闲 block。"""

    def __init__(self, num_blocks: int, block_size: int, watermark: float = 0.01,
                 seed: int | None = None, enable_prefix_caching: bool = False) -> None:
        """Given, not an exercise. 已给出。"""
        self.num_blocks, self.block_size = num_blocks, block_size
        order = list(range(num_blocks))
        if seed is not None:
            random.Random(seed).shuffle(order)
        self.free_block_ids = deque(order)  # the next block taken is free_block_ids[0] / 下一个取 [0]

    @property
    def num_free_blocks(self) -> int:
        """Given. 已给出。"""
        return len(self.free_block_ids)

    def allocate(self, seq) -> list[int]:
        """Give seq (no blocks yet) blocks for all its tokens; set and return seq.block_table.
        Raises ValueError (nothing changed) when too few blocks are free.
        为 seq 的全部 token 分配 block；不够时抛 ValueError（什么都不改）。"""
        # > n = blocks_needed(seq.num_tokens, self.block_size)
        # > if n > self.num_free_blocks: raise ValueError(...)
        # > seq.block_table = [self.free_block_ids.popleft() for _ in range(n)]  # each once / 每块一次
        n = blocks_needed(seq.num_tokens, self.block_size)
        if n > self.num_free_blocks:
            raise ValueError(f"sequence {seq.seq_id} needs {n} blocks, "
                             f"{self.num_free_blocks} are free")
        seq.block_table = [self.free_block_ids.popleft() for _ in range(n)]
        return seq.block_table

    def append_slot(self, seq) -> int:
        """The slot of seq's next token (index seq.cached_token_count); a new block only when the
        last is full. Raises ValueError when a block is needed and none is free.
        下一个 token 的 slot；最后一块满了才拿新 block。"""
        # > token_index = seq.cached_token_count
        # > if token_index == len(seq.block_table) * self.block_size:    # last block full / 最后一块满了
        # >     seq.block_table.append(self.free_block_ids.popleft())
        # > return locate(token_index, seq.block_table, self.block_size).slot  # fresh / 每次重算
        token_index = seq.cached_token_count
        if token_index >= len(seq.block_table) * self.block_size:
            if not self.free_block_ids:
                raise ValueError(f"no free block for sequence {seq.seq_id}")
            seq.block_table.append(self.free_block_ids.popleft())
        return locate(token_index, seq.block_table, self.block_size).slot

    def free(self, seq) -> list[int]:
        """Give all of seq's blocks back; seq.block_table becomes []. Returns the blocks freed.
        归还 seq 的全部 block，并把 seq.block_table 清空；返回归还的 block。"""
        # > freed = seq.block_table
        # > self.free_block_ids.extend(freed)
        # > seq.block_table = []            # nobody may read through a freed table / 释放后不能再经它读取
        freed = list(seq.block_table)
        self.free_block_ids.extend(freed)
        seq.block_table = []
        return freed
