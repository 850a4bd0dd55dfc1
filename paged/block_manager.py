"""The Block Manager: where each sequence's KV goes.

It owns the free queue of physical blocks and every sequence's block table: allocate blocks for a prompt (prefill),
append one slot per decode step (a new block only when the last one is full), and return blocks to the free queue
when a sequence finishes. Reference counts let blocks be shared; a block is free only when its count is zero.

Which free block is taken next, when a full block is hashed and what eviction drops follow vLLM 0.32's v1
`KVCacheManager` exactly (paged.prefix_cache gives each rule and why; with the shuffle off our block b is vLLM's
b + 1, its block 0 being a reserved null block). Prefix caching: a new prompt reuses cached full blocks, but always
computes its last block, so a token runs through the model and a shared block is never written. Forking (parallel
sampling; ours, vLLM v1 has none): children share the parent's blocks; appending into a shared, partly filled last
block first copies it (copy-on-write), recorded in `pending_copies` for the engine to carry out.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from .addressing import blocks_needed, slot_of
from .checks import as_bool, as_float, as_int
from .config import MAX_BLOCK_SIZE, MAX_NUM_BLOCKS
from .prefix_cache import FreeBlockQueue, PrefixCache, initial_order
from .sequence import Sequence


def first_owners(tables: Mapping[int, Iterable[int]], num_blocks: int) -> list[int | None]:
    """physical block -> the first seq id (in the tables' order: allocation order) whose table holds it, or None
    when no table does. tables: seq_id -> block table."""
    owners: list[int | None] = [None] * num_blocks
    for seq_id, table in tables.items():
        for block in table:
            if owners[block] is None:
                owners[block] = seq_id
    return owners


class BlockManager:
    """Free queue + reference counts over `num_blocks` physical blocks of `block_size` slots.

    watermark: fraction of the pool `can_allocate` keeps free for running sequences' decode slots.
    seed: shuffle the free queue (deterministically) so demos show scattered blocks; None keeps vLLM's 0, 1, 2, …
    Raises ValueError for num_blocks outside [1, MAX_NUM_BLOCKS], block_size outside [1, MAX_BLOCK_SIZE], a
    watermark outside [0, 1), or a float / bool where an integer is meant.
    """

    def __init__(self, num_blocks: int, block_size: int, watermark: float = 0.01, seed: int | None = None,
                 enable_prefix_caching: bool = False) -> None:
        num_blocks = as_int(num_blocks, "num_blocks", 1, MAX_NUM_BLOCKS)
        block_size = as_int(block_size, "block_size", 1, MAX_BLOCK_SIZE)
        watermark = as_float(watermark, "watermark", 0.0)
        if watermark >= 1.0:
            raise ValueError(f"watermark must be in [0, 1), got {watermark!r}")
        seed = None if seed is None else as_int(seed, "seed")
        enable_prefix_caching = as_bool(enable_prefix_caching, "enable_prefix_caching")
        self.num_blocks, self.block_size, self.watermark = num_blocks, block_size, watermark
        self.watermark_blocks = int(watermark * num_blocks)
        self.free_block_ids = FreeBlockQueue.fromkeys(initial_order(num_blocks, seed))  # head = next block taken
        self.ref_counts = [0] * num_blocks
        self.tables: dict[int, list[int]] = {}  # seq_id -> its block table (the same list object as seq.block_table)
        self._freed: set[int] = set()
        self.enable_prefix_caching = enable_prefix_caching
        self.cache = PrefixCache()  # the prefix-cache index (empty while prefix caching is off)
        self.pending_copies: list[tuple[int, int]] = []  # copy-on-write (src, dst) the engine must carry out
        self.last_hits: dict[int, list[bool]] = {}  # seq_id -> per logical block: a prefix-cache hit? (while held)

    # --- queries ---------------------------------------------------------------------------------------------
    block_hash = property(lambda self: self.cache.block_hash, doc="cached block -> the hash it is filed under")
    block_tokens = property(lambda self: self.cache.block_tokens, doc="cached block -> its token ids")

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    def _prefix_hits(self, token_ids: list[int]) -> list[int]:
        """Cached blocks matching the prompt's leading full blocks, stopping before the block holding its last
        token (that one is always computed)."""
        return self.cache.hits(token_ids, self.block_size) if self.enable_prefix_caching else []

    def _tokens_to_cover(self, seq: Sequence, num_hits: int, max_new_tokens: int | None) -> int:
        """Tokens the first allocation covers: all of them, or (chunked prefill) the hits plus max_new_tokens."""
        if max_new_tokens is None:
            return seq.num_tokens
        return min(seq.num_tokens, num_hits * self.block_size + max_new_tokens)

    def _blocks_to_take(self, seq: Sequence, max_new_tokens: int | None = None) -> int:
        hits = self._prefix_hits(seq.token_ids)
        covered = self._tokens_to_cover(seq, len(hits), max_new_tokens)
        fresh = blocks_needed(covered, self.block_size) - len(hits)
        return fresh + sum(self.ref_counts[b] == 0 for b in hits)  # cached blocks on the free list count too

    def can_allocate(self, seq: Sequence, max_new_tokens: int | None = None) -> bool:
        """Enough free blocks for all of seq's tokens (less prefix-cache hits) while keeping the watermark free;
        with max_new_tokens (chunked prefill), only for the hits plus that many tokens."""
        return self.num_free_blocks - self._blocks_to_take(seq, max_new_tokens) >= self.watermark_blocks

    def needs_new_block(self, seq: Sequence) -> bool:
        """True when the next token to cache (index cached_token_count) starts a new block."""
        return seq.cached_token_count >= len(seq.block_table) * self.block_size

    def append_needs_block(self, seq: Sequence) -> bool:
        """The next append takes a free block: a new block, or a copy of a shared, partly filled last block."""
        return self.append_needs_blocks((seq,))[0]

    def append_needs_blocks(self, seqs: list[Sequence] | tuple[Sequence, ...]) -> list[bool]:
        """For each of `seqs`: does its next append take a free block (a new block, or a copy of a shared, partly
        filled last block)? One pass: the scheduler asks it of every running sequence each decode step."""
        refs = self.ref_counts
        return [self.needs_new_block(s) or refs[s.block_table[-1]] > 1 for s in seqs]

    def fills_block(self, seq: Sequence) -> bool:
        """Prefix caching: this decode step fills seq's last block, so the scheduler calls append_slot to hash it."""
        return self.enable_prefix_caching and (seq.cached_token_count + 1) % self.block_size == 0

    def ownership(self) -> list[int | None]:
        """physical block -> owning seq id (the first owner if shared), or None when free (built on demand)."""
        return first_owners(self.tables, self.num_blocks)

    def block_owners(self) -> list[tuple[int, ...]]:
        """physical block -> every seq id whose table holds it (empty when free)."""
        owners: list[tuple[int, ...]] = [()] * self.num_blocks
        for seq_id, table in self.tables.items():
            for block in table:
                owners[block] += (seq_id,)
        return owners

    # --- mutations -------------------------------------------------------------------------------------------
    def _take(self) -> int:
        """Take the block at the head of the free queue for new contents; a cached block reused this way loses its
        hash (eviction)."""
        block_id = self.free_block_ids.take()
        assert self.ref_counts[block_id] == 0, f"block {block_id} on the free queue with ref count != 0"
        self.ref_counts[block_id] = 1
        self.cache.evict(block_id)
        return block_id

    def _file(self, seq: Sequence, num_tokens: int) -> None:
        """Prefix caching: index seq's full blocks among its first num_tokens tokens (rule 4)."""
        if self.enable_prefix_caching:
            self.cache.file(seq.block_table, seq.token_ids, self.block_size, min(num_tokens, seq.num_tokens))

    def move_to_front(self, block_ids: list[int]) -> None:
        """Teaching demos that draw specific tables: put these free blocks at the head of the free queue, in order,
        so the next blocks taken (allocate without hits, then append_slot) are exactly them. Raises ValueError
        (nothing changed) unless block_ids is a list of integer ids of free blocks, none twice."""
        self.free_block_ids.move_to_front(block_ids, self.num_blocks)

    def allocate(self, seq: Sequence, max_new_tokens: int | None = None) -> list[int]:
        """Give `seq` blocks for all its tokens (the prompt at first prefill; prompt + generated after a
        preemption): prefix-cache hits first, then fresh blocks from the head of the free queue; the full blocks it
        writes are hashed now. max_new_tokens (chunked prefill): cover only the hits plus that many tokens
        (`ensure_capacity` grows the table for later chunks). Raises ValueError (nothing changed) if seq already
        holds blocks or the pool lacks free blocks."""
        if seq.block_table or seq.seq_id in self.tables:
            raise ValueError(f"sequence {seq.seq_id} already holds blocks {seq.block_table}; free it first")
        if self._blocks_to_take(seq, max_new_tokens) > self.num_free_blocks:
            raise ValueError(f"sequence {seq.seq_id} needs {blocks_needed(seq.num_tokens, self.block_size)} blocks "
                             f"but only {self.num_free_blocks} of {self.num_blocks} are free")
        hits = self._prefix_hits(seq.token_ids)
        for block in hits:  # shared: one more reference (off the free queue if nobody held it: a touch)
            if self.ref_counts[block] == 0:
                del self.free_block_ids[block]
            self.ref_counts[block] += 1
        covered = self._tokens_to_cover(seq, len(hits), max_new_tokens)
        table = hits + [self._take() for _ in range(blocks_needed(covered, self.block_size) - len(hits))]
        seq.block_table = self.tables[seq.seq_id] = table
        self._freed.discard(seq.seq_id)
        self.last_hits[seq.seq_id] = [i < len(hits) for i in range(len(table))]
        if hits:
            seq.cached_token_count = len(hits) * self.block_size  # their K/V are already written
        self._file(seq, covered)  # every full block written by the end of this step
        return table

    def fork(self, parent: Sequence, child: Sequence) -> list[int]:
        """Give `child` the parent's blocks (shared: ref counts up). Raises ValueError if parent holds none."""
        if parent.seq_id not in self.tables:
            raise ValueError(f"cannot fork sequence {parent.seq_id}: it holds no blocks")
        if child.seq_id in self.tables:
            raise ValueError(f"sequence {child.seq_id} already holds blocks")
        child.block_table = list(parent.block_table)
        for block in child.block_table:
            self.ref_counts[block] += 1
        self.tables[child.seq_id] = child.block_table  # the same list object, as allocate's
        self._freed.discard(child.seq_id)
        return child.block_table

    def append_slot(self, seq: Sequence) -> int:
        """The slot where seq's next token (index cached_token_count) is written; takes a new block from the free
        queue only when the last block is full; with prefix caching, hashes the block this token fills.
        Raises ValueError if seq holds no blocks or the pool is full."""
        if not seq.block_table or seq.seq_id not in self.tables:
            raise ValueError(f"sequence {seq.seq_id} holds no blocks: allocate (prefill) before append_slot")
        if self.append_needs_block(seq) and not self.free_block_ids:
            raise ValueError(f"no free block for sequence {seq.seq_id}'s token {seq.cached_token_count}: "
                             "the pool is full (the scheduler should preempt)")
        if self.needs_new_block(seq):
            seq.block_table.append(self._take())
        elif self.ref_counts[seq.block_table[-1]] > 1:  # copy-on-write: never write into a shared block
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
        """Chunked prefill: grow seq's table with fresh blocks until it holds `num_tokens` tokens (the ones written
        this step included); with prefix caching, index the blocks those tokens fill. Returns the blocks taken.
        Raises ValueError if seq holds no blocks or the pool lacks free blocks (nothing changed)."""
        if not seq.block_table or seq.seq_id not in self.tables:
            raise ValueError(f"sequence {seq.seq_id} holds no blocks: allocate before ensure_capacity")
        grow = self.blocks_to_grow(seq, num_tokens)
        if grow > self.num_free_blocks:
            raise ValueError(f"sequence {seq.seq_id} needs {grow} more blocks for {num_tokens} tokens, "
                             f"{self.num_free_blocks} free (the scheduler should preempt)")
        assert (self.ref_counts[seq.block_table[-1]] == 1 or seq.cached_token_count == len(seq.block_table)
                * self.block_size), "a sequence mid-prefill never shares a partly filled last block"
        seq.block_table.extend(taken := [self._take() for _ in range(grow)])
        self._file(seq, num_tokens)
        return taken

    def num_shared_saved(self) -> int:
        """Blocks that sharing saves right now: references held minus distinct blocks in use."""
        return sum(self.ref_counts) - sum(c > 0 for c in self.ref_counts)

    def free(self, seq: Sequence) -> list[int]:
        """Drop seq's references, last block first (rule 3); a block whose count reaches 0 goes to the head of the
        free queue when it has no hash, to its tail when it is cached (rules 1, 2). Returns those blocks, in that
        order. Raises ValueError on a double free or a sequence this manager never allocated."""
        if seq.seq_id not in self.tables:
            if seq.seq_id in self._freed:
                raise ValueError(f"double free: sequence {seq.seq_id}'s blocks were already freed")
            raise ValueError(f"free of unknown sequence {seq.seq_id}: this block manager never allocated it")
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

    def check_invariants(self) -> None:
        """Assert the bookkeeping is consistent (used by tests and the app's self-check)."""
        counts = [len(o) for o in self.block_owners()]
        assert counts == self.ref_counts, "ref counts differ from the number of tables holding each block"
        free = self.free_block_ids
        assert all((b in free) == (counts[b] == 0) for b in range(self.num_blocks)), "free queue != blocks with ref 0"
        self.cache.check()
