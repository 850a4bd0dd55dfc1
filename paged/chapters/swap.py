"""Preemption by swapping (the paper's §4.5): a victim's blocks go to a host pool and come back.

When decode needs a block the pool cannot give, a running sequence must leave. *Recompute* frees its
blocks and forgets its cache (cached_token_count = 0): it comes back as a prefill of every token it
knows. *Swap* first copies each of its blocks to a free block of a swap pool, frees them, and keeps
cached_token_count: when blocks are free again it gets fresh pool blocks, its K/V are copied back
into them, and it decodes on as if nothing happened. The block table changes (new physical blocks);
the logical blocks hold the same tokens.

`SwapSpace` is the swap pool's bookkeeping: a free list of swap block ids and, for each swapped
sequence, the swap blocks holding its logical blocks in order (its "swap table"). Each swap is a
list of (src, dst) block pairs, vLLM v0's `blocks_to_swap_out` / `blocks_to_swap_in`;
`copy_blocks_between` carries one out on the K/V tensors.

Here both pools are host memory (this tool runs on a CPU), so a "swap" is a copy between two host
pools; on a GPU the first pool is device memory and the swap crosses PCIe, which is what makes
small blocks expensive (Fig. 19).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import torch

from ..checks import as_int
from ..config import MAX_SWAP_BLOCKS, PREEMPTION_MODES, check_swap  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from ..block_manager import BlockManager
    from ..kv_cache import KVCachePool
    from ..sequence import Sequence


class SwapSpace:
    """Free swap blocks and each swapped sequence's swap table, over a host pool's `num_blocks`.
    Raises: ValueError unless num_blocks is an integer in [1, MAX_SWAP_BLOCKS]."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = as_int(num_blocks, "swap_space", 1, MAX_SWAP_BLOCKS)
        self.free_block_ids: deque[int] = deque(range(self.num_blocks))  # head: taken next
        self.tables: dict[int, list[int]] = {}  # seq_id -> its swap blocks, in logical order
        self._journal: list | None = None  # since the last snapshot: ("out" | "in", seq_id, table)

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    def holds(self, seq_id: int) -> bool:
        """seq_id is swapped out (its K/V wait in the swap pool)."""
        return seq_id in self.tables

    def can_swap_out(self, seq: Sequence) -> bool:
        """Room for every block of seq's table (shared ones too: each swapped sequence copies)."""
        return 0 < len(seq.block_table) <= self.num_free_blocks

    def swap_out(self, seq: Sequence, bm: BlockManager) -> tuple[list[tuple[int, int]], list[int]]:
        """Give each of seq's blocks a swap block, then free its pool blocks (cached count kept).
        Returns ((pool block, swap block) pairs to copy before those pool blocks are reused, the
        pool blocks released).
        Raises: ValueError (nothing changed) if seq is already swapped or does not fit."""
        if self.holds(seq.seq_id):
            raise ValueError(f"sequence {seq.seq_id} is already swapped out")
        if not self.can_swap_out(seq):
            raise ValueError(f"sequence {seq.seq_id} needs {len(seq.block_table)} swap blocks, "
                             f"{self.num_free_blocks} of {self.num_blocks} are free")
        pairs = [(block, self.free_block_ids.popleft()) for block in seq.block_table]
        self.tables[seq.seq_id] = [dst for _, dst in pairs]
        self._note("out", seq.seq_id, self.tables[seq.seq_id])
        cached = seq.cached_token_count
        released = bm.free(seq)  # empties seq.block_table
        seq.cached_token_count = cached  # BlockManager.free leaves it; said here: it is the point
        return pairs, released

    def blocks_to_swap_in(self, seq_id: int) -> int:
        """Pool blocks swapping seq_id back in takes."""
        return len(self.tables[seq_id])

    def swap_in(self, seq: Sequence, bm: BlockManager) -> list[tuple[int, int]]:
        """Fresh pool blocks for each of seq's swap blocks, in logical order; the swap blocks go
        back to the free list. Returns the (swap block, pool block) pairs to copy before seq runs.
        Raises: ValueError (nothing changed) if seq is not swapped, holds blocks or cannot fit."""
        if not self.holds(seq.seq_id):
            raise ValueError(f"sequence {seq.seq_id} is not swapped out")
        if seq.block_table or seq.seq_id in bm.tables:
            raise ValueError(f"sequence {seq.seq_id} already holds blocks {seq.block_table}")
        table = self.tables[seq.seq_id]
        if len(table) > bm.num_free_blocks:
            raise ValueError(f"sequence {seq.seq_id} needs {len(table)} blocks to swap in, "
                             f"{bm.num_free_blocks} free")
        del self.tables[seq.seq_id]
        pairs = [(src, bm._take()) for src in table]
        seq.block_table = bm.tables[seq.seq_id] = [dst for _, dst in pairs]
        bm._freed.discard(seq.seq_id)
        bm.last_hits[seq.seq_id] = [False] * len(table)
        self.free_block_ids.extend(table)
        self._note("in", seq.seq_id, table)
        return pairs

    def drop(self, seq_id: int) -> list[int]:
        """Free an aborted swapped sequence's swap blocks (back to the free list); returns them."""
        table = self.tables.pop(seq_id, None)
        if table is None:
            return []
        self.free_block_ids.extend(table)
        self._note("in", seq_id, table)  # undone as a swap-in is
        return table

    def _note(self, kind: str, seq_id: int, table: list[int]) -> None:
        if self._journal is not None:
            self._journal.append((kind, seq_id, table))

    def snapshot(self) -> list:
        """Start recording every swap_out / swap_in / drop; returns the record restore() undoes.
        O(1): the record grows with what is swapped after it, never with the swap pool's size."""
        self._journal = []
        return self._journal

    def restore(self, snap: list) -> None:
        """Undo, newest first, what `snap` (this space's latest snapshot) recorded: the free list in
        its order and every swap table as they were then."""
        for kind, seq_id, table in reversed(snap):
            if kind == "out":  # its blocks were taken from the head of the free list
                del self.tables[seq_id]
                self.free_block_ids.extendleft(reversed(table))
            else:  # its blocks were given back at the tail
                for _ in table:
                    self.free_block_ids.pop()
                self.tables[seq_id] = table
        snap.clear()


def copy_blocks_between(src: KVCachePool, dst: KVCachePool, pairs: list[tuple[int, int]]) -> int:
    """Copy K and V of every layer from block a of `src` to block b of `dst`, each (a, b) in pairs
    (the pools share every dimension but num_blocks). Returns the bytes copied."""
    if not pairs:
        return 0
    a = torch.tensor([p[0] for p in pairs], device=src.key_cache.device)
    b = torch.tensor([p[1] for p in pairs], device=dst.key_cache.device)
    for s, d in ((src.key_cache, dst.key_cache), (src.value_cache, dst.value_cache)):
        for layer in range(src.num_layers):  # per layer, along dim 0: ~100x faster on CPU
            d[layer].index_copy_(0, b, s[layer].index_select(0, a).to(d.device, d.dtype))
    return len(pairs) * src.bytes_per_block(src.num_layers, src.block_size, src.num_kv_heads,
                                            src.head_dim, src.dtype)
