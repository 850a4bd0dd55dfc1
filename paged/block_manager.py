"""The Block Manager: the free queue of physical blocks and every sequence's block table.

allocate (a prompt's blocks), append_slot (a new block when the last is full), free; ref counts
share blocks (fork, prefix caching), copy-on-write guards them. Queue order, hashing, eviction:
vLLM 0.32's v1 KVCacheManager (paged/prefix_cache.py).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from .addressing import blocks_needed, slot_of
from .checks import check_allocated, check_forkable, check_freeable, check_ref_counts
from .config import check_block_manager
from .prefix_cache import FreeBlockQueue, PrefixCache, initial_order
from .sequence import Sequence


class BlockManager:
    """Free queue + ref counts of num_blocks blocks; watermark: kept free for decode; seed: shuffle.
    Raises: ValueError for a size or a watermark out of range."""

    def __init__(self, num_blocks: int, block_size: int, watermark: float = 0.01,
                 seed: int | None = None, enable_prefix_caching: bool = False) -> None:
        num_blocks, block_size, watermark, seed, enable_prefix_caching = check_block_manager(
            num_blocks, block_size, watermark, seed, enable_prefix_caching)
        self.num_blocks, self.block_size, self.watermark = num_blocks, block_size, watermark
        self.watermark_blocks = int(watermark * num_blocks)
        self.free_block_ids = FreeBlockQueue.fromkeys(initial_order(num_blocks, seed))  # head: next
        self.ref_counts = [0] * num_blocks
        self.tables: dict[int, list[int]] = {}  # seq_id -> its block table (seq.block_table itself)
        self._freed: set[int] = set()
        self.enable_prefix_caching = enable_prefix_caching
        self.cache = PrefixCache()  # the prefix-cache index (empty while prefix caching is off)
        self.pending_copies: list[tuple[int, int]] = []  # copy-on-write (src, dst) for the engine
        self.last_hits: dict[int, list[bool]] = {}  # seq_id -> per logical block: a prefix hit?

    # --- queries ----------------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    def _prefix_hits(self, token_ids: list[int]) -> list[int]:
        """Cached blocks matching the prompt's full blocks, short of the one with its last token."""
        return self.cache.hits(token_ids, self.block_size) if self.enable_prefix_caching else []

    def _tokens_to_cover(self, seq: Sequence, num_hits: int, max_new_tokens: int | None) -> int:
        """Tokens the first allocation covers: all, or (chunked) hits plus max_new_tokens."""
        if max_new_tokens is None:
            return seq.num_tokens
        return min(seq.num_tokens, num_hits * self.block_size + max_new_tokens)

    def _blocks_to_take(self, seq: Sequence, max_new_tokens: int | None = None) -> int:
        hits = self._prefix_hits(seq.token_ids)
        covered = self._tokens_to_cover(seq, len(hits), max_new_tokens)
        fresh = blocks_needed(covered, self.block_size) - len(hits)
        return fresh + sum(self.ref_counts[b] == 0 for b in hits)  # cached, free blocks count too

    def can_allocate(self, seq: Sequence, max_new_tokens: int | None = None) -> bool:
        """Enough free blocks for seq's tokens (less hits; chunked: hits + max_new_tokens)?"""
        taken = self._blocks_to_take(seq, max_new_tokens)
        return self.num_free_blocks - taken >= self.watermark_blocks

    def needs_new_block(self, seq: Sequence) -> bool:
        """The next token to cache (index cached_token_count) starts a new block."""
        return seq.cached_token_count >= len(seq.block_table) * self.block_size

    def append_needs_block(self, seq: Sequence) -> bool:
        """The next append takes a free block: a new one, or a copy of a shared last one."""
        return self.append_needs_blocks((seq,))[0]

    def append_needs_blocks(self, seqs: list[Sequence] | tuple[Sequence, ...]) -> list[bool]:
        """`append_needs_block` of each of `seqs` in one pass (every decode step)."""
        refs = self.ref_counts
        return [self.needs_new_block(s) or refs[s.block_table[-1]] > 1 for s in seqs]

    def fills_block(self, seq: Sequence) -> bool:
        """Prefix caching: this decode fills seq's last block (append_slot then hashes it)."""
        return self.enable_prefix_caching and (seq.cached_token_count + 1) % self.block_size == 0

    # --- mutations --------------------------------------------------------------------------------
    def _take(self) -> int:
        """The free queue's head block; a cached block taken so loses its hash (eviction)."""
        block_id = self.free_block_ids.take()
        assert self.ref_counts[block_id] == 0, \
            f"block {block_id} on the free queue with ref count != 0"
        self.ref_counts[block_id] = 1
        self.cache.evict(block_id)
        return block_id

    def _file(self, seq: Sequence, num_tokens: int) -> None:
        """Prefix caching: index seq's full blocks among its first num_tokens tokens (rule 4)."""
        if self.enable_prefix_caching:
            self.cache.file(seq.block_table, seq.token_ids, self.block_size,
                            min(num_tokens, seq.num_tokens))

    def move_to_front(self, block_ids: list[int]) -> None:
        """Demos: these free blocks go to the queue's head, in order, to be taken next.
        Raises: ValueError (nothing changed) unless they are distinct ids of free blocks."""
        self.free_block_ids.move_to_front(block_ids, self.num_blocks)

    def allocate(self, seq: Sequence, max_new_tokens: int | None = None) -> list[int]:
        """Blocks for seq's tokens (chunked: hits + max_new_tokens): prefix hits, then fresh ones.
        Raises: ValueError (nothing changed) if seq holds blocks or too few are free."""
        if seq.block_table or seq.seq_id in self.tables:
            raise ValueError(f"sequence {seq.seq_id} already holds blocks {seq.block_table}; "
                             "free it first")
        if self._blocks_to_take(seq, max_new_tokens) > self.num_free_blocks:
            needed = blocks_needed(seq.num_tokens, self.block_size)
            raise ValueError(f"sequence {seq.seq_id} needs {needed} blocks but only "
                             f"{self.num_free_blocks} of {self.num_blocks} are free")
        hits = self._prefix_hits(seq.token_ids)
        for block in hits:  # one more reference (off the free queue if nobody held it: a touch)
            if self.ref_counts[block] == 0:
                del self.free_block_ids[block]
            self.ref_counts[block] += 1
        covered = self._tokens_to_cover(seq, len(hits), max_new_tokens)
        fresh = blocks_needed(covered, self.block_size) - len(hits)
        table = hits + [self._take() for _ in range(fresh)]
        seq.block_table = self.tables[seq.seq_id] = table
        self._freed.discard(seq.seq_id)
        self.last_hits[seq.seq_id] = [i < len(hits) for i in range(len(table))]
        if hits:
            seq.cached_token_count = len(hits) * self.block_size  # their K/V are already written
        self._file(seq, covered)  # every full block written by the end of this step
        return table

    def fork(self, parent: Sequence, child: Sequence) -> list[int]:
        """Give `child` the parent's blocks (ref counts up). Raises: ValueError if it holds none."""
        check_forkable(parent.seq_id, child.seq_id, self.tables)
        child.block_table = list(parent.block_table)
        for block in child.block_table:
            self.ref_counts[block] += 1
        self.tables[child.seq_id] = child.block_table  # the same list object, as allocate's
        self._freed.discard(child.seq_id)
        return child.block_table

    def append_slot(self, seq: Sequence) -> int:
        """The slot of seq's next token: a new block only when the last is full, a copy when shared.
        Raises: ValueError if seq holds no blocks or the pool is full."""
        check_allocated(seq, self.tables, "append_slot")
        if self.append_needs_block(seq) and not self.free_block_ids:
            raise ValueError(f"no free block for sequence {seq.seq_id}'s token "
                             f"{seq.cached_token_count}: "
                             "the pool is full (the scheduler should preempt)")
        if self.needs_new_block(seq):
            seq.block_table.append(self._take())
        elif self.ref_counts[seq.block_table[-1]] > 1:  # copy-on-write: never write a shared block
            shared = seq.block_table[-1]
            self.ref_counts[shared] -= 1
            seq.block_table[-1] = self._take()
            self.pending_copies.append((shared, seq.block_table[-1]))
        self._file(seq, seq.cached_token_count + 1)
        return slot_of(seq.cached_token_count, seq.block_table, self.block_size)

    def blocks_to_grow(self, seq: Sequence, num_tokens: int) -> int:
        """Free blocks `ensure_capacity(seq, num_tokens)` would take."""
        return max(0, blocks_needed(num_tokens, self.block_size) - len(seq.block_table))

    def ensure_capacity(self, seq: Sequence, num_tokens: int) -> list[int]:
        """Chunked prefill: fresh blocks until seq's table holds `num_tokens`; returns them.
        Raises: ValueError (nothing changed) if seq holds no blocks or too few are free."""
        check_allocated(seq, self.tables, "ensure_capacity")
        grow = self.blocks_to_grow(seq, num_tokens)
        if grow > self.num_free_blocks:
            raise ValueError(f"sequence {seq.seq_id} needs {grow} more blocks for {num_tokens} "
                             f"tokens, {self.num_free_blocks} free (the scheduler should preempt)")
        assert (self.ref_counts[seq.block_table[-1]] == 1 or seq.cached_token_count
                == len(seq.block_table) * self.block_size), \
            "a sequence mid-prefill never shares a partly filled last block"
        seq.block_table.extend(taken := [self._take() for _ in range(grow)])
        self._file(seq, num_tokens)
        return taken

    def free(self, seq: Sequence) -> list[int]:
        """Drop seq's refs, last block first; blocks at 0 (returned) go to the queue's head (cached:
        its tail).
        Raises: ValueError on a double free or an unknown sequence."""
        check_freeable(seq.seq_id, self.tables, self._freed)
        table = self.tables.pop(seq.seq_id)
        released = []
        for block in reversed(table):
            self.ref_counts[block] -= 1
            assert self.ref_counts[block] >= 0, f"block {block} ref count went negative"
            if self.ref_counts[block] == 0:
                released.append(block)
        self.free_block_ids.release(released, self.cache.block_hash)
        seq.block_table = []
        self._freed.add(seq.seq_id)
        self.last_hits.pop(seq.seq_id, None)  # kept only while it holds blocks: bounded by the pool
        return released

    # --- views (pages, tests): change nothing -----------------------------------------------------
    block_hash = property(lambda self: self.cache.block_hash, doc="cached block -> its hash")
    block_tokens = property(lambda self: self.cache.block_tokens, doc="cached block -> token ids")

    def ownership(self) -> list[int | None]:
        """physical block -> owning seq id (the first owner if shared), or None when free."""
        return first_owners(self.tables, self.num_blocks)

    def block_owners(self) -> list[tuple[int, ...]]:
        """physical block -> every seq id whose table holds it (empty when free)."""
        owners: list[tuple[int, ...]] = [()] * self.num_blocks
        for seq_id, table in self.tables.items():
            for block in (b for b in table if b >= 0):  # -1: a hole
                owners[block] += (seq_id,)
        return owners

    def num_shared_saved(self) -> int:
        """Blocks sharing saves now: references held minus distinct blocks in use."""
        return sum(self.ref_counts) - sum(c > 0 for c in self.ref_counts)

    def check_invariants(self) -> None:
        """Assert the bookkeeping is consistent (tests, the app's self-check)."""
        check_ref_counts(self.ref_counts, self.block_owners(), self.free_block_ids)
        self.cache.check()


def first_owners(tables: Mapping[int, Iterable[int]], num_blocks: int) -> list[int | None]:
    """physical block -> the first seq id (allocation order) whose table holds it, or None."""
    owners: list[int | None] = [None] * num_blocks
    for seq_id, table in tables.items():
        for block in table:
            if block >= 0 and owners[block] is None:  # -1: a hole (a block a sliding window freed)
                owners[block] = seq_id
    return owners
