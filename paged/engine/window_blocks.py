"""The Block Manager with a sliding window: blocks behind the window are freed while a seq runs.

As vLLM 0.32's v1 SlidingWindowManager (vllm/v1/core/single_type_kv_cache_manager.py).

`slide(seqs)` does what vLLM's remove_skipped_blocks does: for each sequence, the leading blocks
wholly before the window of its next token (num_skipped_blocks of its cached_token_count) lose this
sequence's reference and become HOLEs in its table, scanning from the last of them backwards and
stopping at the first hole (the ones before were freed earlier). A block whose count reaches 0 goes
to the free queue by the usual rules (no hash: head; cached: tail), so with prefix caching a full
block that slid out of one window stays findable for a later prompt.

Prefix caching also follows vLLM's sliding-window hit rule: a prompt needs only the last
ceil((W - 1) / block_size) cached blocks before the point it resumes from, so the hits are
searched right to left for such a run and the blocks before it are holes from the start (vLLM's
find_longest_cache_hit, without EAGLE or alignment).

free_early (the page's break-it): slide frees one block more, the block still holding the window's
first tokens, and leaves its entry in the table (a dangling reference): the next block taken may be
that very block, written with new tokens, and the attention reads them as old ones. The contiguous
twin shows the drift.
"""

from __future__ import annotations

import math

from ..addressing import blocks_needed
from ..block_manager import BlockManager
from ..checks import as_bool, as_int
from ..sequence import Sequence
from ..chapters.window import HOLE, num_skipped_blocks


class WindowBlockManager(BlockManager):
    """A BlockManager whose sequences read only their last `window` tokens.

    Raises: ValueError for a window < 1, and as BlockManager does."""

    def __init__(self, num_blocks: int, block_size: int, window: int, watermark: float = 0.01,
                 seed: int | None = None, enable_prefix_caching: bool = False,
                 free_early: bool = False) -> None:
        super().__init__(num_blocks, block_size, watermark, seed, enable_prefix_caching)
        self.window = as_int(window, "sliding_window", 1)
        self.free_early = as_bool(free_early, "free_early")
        # free_early only: seq_id -> logical blocks freed, still listed
        self.dangling: dict[int, set[int]] = {}

    def held(self, seq: Sequence) -> int:
        """Blocks seq's table holds a reference to (holes and dangling entries not counted)."""
        gone = self.dangling.get(seq.seq_id, ())
        return sum(b != HOLE and i not in gone for i, b in enumerate(seq.block_table))

    # --- sliding ----------------------------------------------------------------------------------
    def slide(self, seqs: list[Sequence]) -> dict[int, list[int]]:
        """Free each seq's blocks wholly before its next token's window; returns seq_id -> freed.

        The next token is index cached_token_count; freed entries become HOLEs. Only sequences that
        freed blocks are in the result."""
        out = {}
        for seq in seqs:
            if seq.seq_id not in self.tables:
                continue
            released = self._slide_one(seq)
            if released:
                out[seq.seq_id] = released
        return out

    def _slide_one(self, seq: Sequence) -> list[int]:
        table = seq.block_table
        skip = min(num_skipped_blocks(seq.cached_token_count, self.window, self.block_size),
                   len(table))
        gone = self.dangling.setdefault(seq.seq_id, set()) if self.free_early else set()
        dropped = []
        # backwards, as vLLM's _remove_blocks_in_range: stop at a hole
        for i in range(skip - 1, -1, -1):
            if table[i] == HOLE:
                break
            if i not in gone:
                dropped.append(table[i])
            gone.discard(i)
            table[i] = HOLE
        if self.free_early and skip < len(table) - 1 and skip not in gone and table[skip] != HOLE:
            # the bug: the block the window still starts in, entry kept
            dropped.insert(0, table[skip])
            gone.add(skip)
        return self._drop(dropped)

    def _drop(self, blocks: list[int]) -> list[int]:
        """Drop one reference to each of `blocks` (last first); those at 0 go to the free queue."""
        released = []
        for block in blocks:
            self.ref_counts[block] -= 1
            assert self.ref_counts[block] >= 0, f"block {block} ref count went negative"
            if self.ref_counts[block] == 0:
                released.append(block)
        self.free_block_ids.release(released, self.cache.block_hash)
        return released

    # --- what BlockManager does, with holes in the tables -----------------------------------------
    def _prefix_hits(self, token_ids: list[int]) -> list[int]:
        """vLLM's sliding-window prefix hit, never the last token's block.

        Right to left, the first run of ceil((W - 1) / block_size) cached blocks (a run from block
        0 may be shorter); the blocks before the run are HOLEs."""
        if not self.enable_prefix_caching:
            return []
        bs, cache = self.block_size, self.cache
        need = max(1, math.ceil((self.window - 1) / bs))
        found, parent = [], None
        for i in range((len(token_ids) - 1) // bs):
            tokens = tuple(token_ids[i * bs:(i + 1) * bs])
            parent = cache.chain(parent, tokens)
            found.append(cache.lookup(parent, tokens))
        run = 0
        for i in range(len(found) - 1, -1, -1):
            run = run + 1 if found[i] is not None else 0
            if run >= need:
                hits = [HOLE] * i + found[i:i + run]
                skip = num_skipped_blocks(len(hits) * bs, self.window, bs)
                return [HOLE] * skip + hits[skip:]
        return found[:run] if run and all(b is not None for b in found[:run]) else []

    def _blocks_to_take(self, seq: Sequence, max_new_tokens: int | None = None) -> int:
        hits = self._prefix_hits(seq.token_ids)
        covered = self._tokens_to_cover(seq, len(hits), max_new_tokens)
        fresh = blocks_needed(covered, self.block_size) - len(hits)
        return fresh + sum(self.ref_counts[b] == 0 for b in hits if b != HOLE)

    def allocate(self, seq: Sequence, max_new_tokens: int | None = None) -> list[int]:
        """BlockManager.allocate with sliding-window hits: skipped leading blocks start as HOLEs.

        Raises: ValueError if seq already holds blocks or the free blocks are too few."""
        if seq.block_table or seq.seq_id in self.tables:
            raise ValueError(f"sequence {seq.seq_id} already holds blocks {seq.block_table}; free "
                             "it first")
        # holes take no block
        if (take := self._blocks_to_take(seq, max_new_tokens)) > self.num_free_blocks:
            raise ValueError(f"sequence {seq.seq_id} needs {take} free blocks but only "
                             f"{self.num_free_blocks} of {self.num_blocks} are free")
        hits = self._prefix_hits(seq.token_ids)
        for block in hits:
            if block == HOLE:
                continue
            if self.ref_counts[block] == 0:
                del self.free_block_ids[block]
            self.ref_counts[block] += 1
        covered = self._tokens_to_cover(seq, len(hits), max_new_tokens)
        table = hits + [self._take()
                        for _ in range(blocks_needed(covered, self.block_size) - len(hits))]
        seq.block_table = self.tables[seq.seq_id] = table
        self._freed.discard(seq.seq_id)
        self.dangling.pop(seq.seq_id, None)
        self.last_hits[seq.seq_id] = [i < len(hits) and b != HOLE for i, b in enumerate(table)]
        if hits:
            seq.cached_token_count = len(hits) * self.block_size
        self._file(seq, covered)
        return table

    def _file(self, seq: Sequence, num_tokens: int) -> None:
        """Index seq's full blocks among its first num_tokens tokens, skipping holes.

        Dangling entries are skipped too; the hash chain still runs through their tokens."""
        if not self.enable_prefix_caching:
            return
        bs, cache, table = self.block_size, self.cache, seq.block_table
        gone, token_ids, parent = self.dangling.get(seq.seq_id, ()), seq.token_ids, None
        for i in range(min(len(table), min(num_tokens, seq.num_tokens) // bs)):
            tokens = tuple(token_ids[i * bs:(i + 1) * bs])
            parent = cache.chain(parent, tokens)
            block = table[i]
            if block == HOLE or i in gone or cache.block_hash.get(block) == parent:
                continue
            cache.add(parent, block, tokens)

    def fork(self, parent: Sequence, child: Sequence) -> list[int]:
        """BlockManager.fork, holes (and dangling entries) shared as they are, not counted.

        Raises: ValueError if the parent holds no blocks or the child already holds some."""
        if parent.seq_id not in self.tables:
            raise ValueError(f"cannot fork sequence {parent.seq_id}: it holds no blocks")
        if child.seq_id in self.tables:
            raise ValueError(f"sequence {child.seq_id} already holds blocks")
        gone = self.dangling.get(parent.seq_id, set())
        child.block_table = list(parent.block_table)
        for i, block in enumerate(child.block_table):
            if block != HOLE and i not in gone:
                self.ref_counts[block] += 1
        if gone:
            self.dangling[child.seq_id] = set(gone)
        self.tables[child.seq_id] = child.block_table
        self._freed.discard(child.seq_id)
        return child.block_table

    def free(self, seq: Sequence) -> list[int]:
        """BlockManager.free of the blocks seq still holds (holes and dangling entries are gone)."""
        table, gone = self.tables.get(seq.seq_id), self.dangling.pop(seq.seq_id, set())
        if table is not None:
            table[:] = [b for i, b in enumerate(table) if b != HOLE and i not in gone]
        return super().free(seq)
