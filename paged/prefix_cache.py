"""The free queue and the prefix-cache index behind the BlockManager, by vLLM v1's rules (0.32).

One idea holds both: **the free queue is also the eviction order.** A free block is either empty (no
hash: its contents will never be looked up again) or cached (a full block still indexed by the hash
of the prefix ending with it, so a later prompt with that prefix can reuse it). The next block taken
is the head of the queue; a cached block taken there is evicted (its hash leaves the index). The
rules, each as vLLM 0.32's `BlockPool` / `FreeKVCacheBlockQueue` apply them, and why:

1. Freed blocks **without a hash go to the head** (reused first): nobody can ever hit them, so
   reusing them costs nothing, and every cached block stays findable a little longer. (With prefix
   caching off no block has a hash, so every freed block goes to the head: the most recently freed
   block is the next one taken.)
2. Freed blocks **with a hash go to the tail**: the head of the cached part is the least recently
   used, so eviction is LRU. A prefix-cache hit takes its block out of the queue wherever it sits
   (touch).
3. A request's blocks are freed **last block first**: its tail blocks (the longest, most specific
   prefixes, least likely to be shared) land ahead of its head blocks, so they are evicted first,
   and the shared start of a conversation survives longest.
4. A full block is hashed **as soon as the step that writes its last token is scheduled** (not when
   the next block starts), so a request ending exactly on a block boundary leaves that block
   findable.
5. A recomputed full block whose hash is already cached is **filed as a second block under the same
   hash**; a lookup returns the first one filed that is still cached. (vLLM does not de-duplicate: a
   block table is append-only, so a block id once handed to a request never changes.)

The queue is a doubly linked list of block ids, as vLLM's `FreeKVCacheBlockQueue` is: take from the
head, remove from the middle (a prefix-cache hit) and put at either end are each O(1), whatever the
pool holds. While an engine step runs, the queue and the index also keep an undo journal
(`start_journal` / `undo` / `stop_journal`): each change records its inverse, so a failed step is
rolled back at the cost of what it changed, not of what the pool holds.
"""

from __future__ import annotations

import random
from typing import Iterable, Iterator

from .checks import as_int


def initial_order(num_blocks: int, seed: int | None) -> list[int]:
    """The free queue of a new pool: 0, 1, 2, … (vLLM's order), or shuffled by `seed` (demos show
    scattered blocks; the policy never reads ids: a shuffled pool is vLLM's with blocks renamed)."""
    order = list(range(num_blocks))
    if seed is not None:
        random.Random(seed).shuffle(order)
    return order


END = None  # the list's sentinel: _next[END] is the head, _prev[END] the tail


class FreeBlockQueue:
    """Free physical block ids, head first (the next taken; rules 1-3 place a freed block);
    iterating gives the order they will be taken. A doubly linked list over two dicts (block -> the
    block before / after it): every operation touches only the blocks it moves."""

    def __init__(self, blocks: Iterable[int] = ()) -> None:
        chain = [END, *dict.fromkeys(blocks), END]  # each block once, between its neighbours
        self._next: dict[int | None, int | None] = dict(zip(chain[:-1], chain[1:]))  # END: the head
        self._prev: dict[int | None, int | None] = dict(zip(chain[1:], chain[:-1]))  # END: the tail
        self.journal: list[tuple] | None = None  # undo records while a step is checkpointed

    @classmethod
    def fromkeys(cls, blocks: Iterable[int]) -> FreeBlockQueue:
        """A queue holding `blocks` in this order (the first is the head)."""
        return cls(blocks)

    def __len__(self) -> int:
        return len(self._next) - 1

    def __contains__(self, block: object) -> bool:
        return block is not END and block in self._next

    def __iter__(self) -> Iterator[int]:
        block = self._next[END]
        while block is not END:
            yield block
            block = self._next[block]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FreeBlockQueue) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"FreeBlockQueue({list(self)})"

    def _link(self, block: int, before: int | None, after: int | None) -> None:
        """Insert block between `before` and `after` (neighbours now)."""
        self._next[before] = self._prev[after] = block
        self._prev[block], self._next[block] = before, after
        if self.journal is not None:
            self.journal.append((block,))

    def _unlink(self, block: int) -> None:
        """Take block out of the list. Raises: KeyError if it is not in it."""
        if block is END:
            raise KeyError(block)
        before, after = self._prev.pop(block), self._next.pop(block)
        self._next[before], self._prev[after] = after, before
        if self.journal is not None:
            self.journal.append((block, before, after))

    def __delitem__(self, block: int) -> None:
        """Remove a block from wherever it sits (a prefix-cache hit touching a free cached block).
        Raises: KeyError if it is not free."""
        self._unlink(block)

    def take(self) -> int:
        """Pop the head. Raises: KeyError when empty (callers check num_free_blocks first)."""
        block = self._next[END]
        self._unlink(block)
        return block

    def put_front(self, blocks: Iterable[int]) -> None:
        """Put blocks at the head, keeping their order (the first of `blocks` becomes the head)."""
        for block in reversed(list(blocks)):
            if block in self:
                self._unlink(block)
            self._link(block, END, self._next[END])

    def put_back(self, blocks: Iterable[int]) -> None:
        """Put blocks at the tail, in order (a block already in the queue keeps its place)."""
        for block in blocks:
            if block not in self:
                self._link(block, self._prev[END], END)

    def release(self, blocks: list[int], cached: Iterable[int]) -> None:
        """Blocks just freed (a request's, last first: rule 3): those without a hash to the head
        (rule 1), the cached ones to the tail (rule 2), each group keeping its order."""
        cached = set(cached) if not isinstance(cached, (set, dict)) else cached
        self.put_front([b for b in blocks if b not in cached])
        self.put_back([b for b in blocks if b in cached])

    def move_to_front(self, block_ids: list[int], num_blocks: int) -> None:
        """Put these free blocks at the head, in this order (BlockManager.move_to_front: demos).
        Raises: ValueError (nothing changed) unless block_ids lists free block ids, none twice."""
        if isinstance(block_ids, (str, bytes)) or not hasattr(block_ids, "__iter__"):
            raise ValueError(f"block_ids must be a list of physical block ids, got {block_ids!r}")
        ids = [as_int(b, "block id", 0, num_blocks - 1) for b in block_ids]
        if len(set(ids)) != len(ids):
            raise ValueError(f"block_ids {ids} list a physical block twice")
        taken = [b for b in ids if b not in self]
        if taken:
            raise ValueError(f"physical block(s) {taken} are not free (pool has blocks "
                             f"0..{num_blocks - 1})")
        self.put_front(ids)

    def copy(self) -> FreeBlockQueue:
        """The same blocks in the same order, no journal. O(free blocks): views and tests only."""
        return FreeBlockQueue(self)

    # --- the undo journal (engine/checkpoint.py) --------------------------------------------------
    def start_journal(self) -> None:
        """From now on every change records its inverse (a step is checkpointed)."""
        self.journal = []

    def stop_journal(self) -> None:
        """Forget the journal (the step succeeded)."""
        self.journal = None

    def undo(self) -> None:
        """Undo every change since start_journal, newest first, and stop journalling: the queue
        holds the same blocks in the same order as then. O(changes)."""
        journal, self.journal = self.journal or [], None
        for record in reversed(journal):
            if len(record) == 1:  # an insert: take it out again
                self._unlink(record[0])
            else:  # a removal: link it back between its old neighbours (newer changes are undone)
                self._link(*record)


class PrefixCache:
    """The index: hash of a full block's prefix -> the blocks filed under it, in order, and back.

    The hash chains: a block's hash is hash((parent block's hash, its token ids)), so equal hashes
    mean equal prefixes, not only equal blocks. Each block's token ids are kept too and a lookup
    compares them, so a hash collision never hands out the wrong K/V.
    """

    def __init__(self) -> None:
        self.hash_blocks: dict[int, dict[int, None]] = {}  # hash -> blocks filed under it, in order
        self.block_hash: dict[int, int] = {}  # block -> the hash it is filed under
        self.block_tokens: dict[int, tuple[int, ...]] = {}  # block -> its token ids (collisions)
        # while a step is checkpointed: what each hash and block held before their first change
        self.journal: tuple[dict, dict] | None = None

    @staticmethod
    def chain(parent: int | None, tokens: tuple[int, ...]) -> int:
        """A full block's hash: its parent's hash chained with its token ids."""
        return hash((parent, tokens))

    def lookup(self, h: int, tokens: tuple[int, ...]) -> int | None:
        """The first block filed under `h` (rule 5), if its tokens are `tokens`; else None."""
        blocks = self.hash_blocks.get(h)
        block = next(iter(blocks)) if blocks else None
        return block if block is not None and self.block_tokens[block] == tokens else None

    def hits(self, token_ids: list[int], block_size: int) -> list[int]:
        """Cached blocks matching the leading full blocks of `token_ids`, short of the one holding
        the last token: it always runs through the model (its logits are needed), as in vLLM."""
        hits, parent = [], None
        for i in range((len(token_ids) - 1) // block_size):
            tokens = tuple(token_ids[i * block_size:(i + 1) * block_size])
            parent = self.chain(parent, tokens)
            block = self.lookup(parent, tokens)
            if block is None:
                break
            hits.append(block)
        return hits

    def file(self, table: list[int], token_ids: list[int], block_size: int,
             num_tokens: int) -> None:
        """Index every full block among a table's first `num_tokens` tokens (written by the end of
        the step being scheduled: rule 4). A block already filed keeps its entry; a new block whose
        hash is already cached is filed beside the first (rule 5)."""
        parent = None
        for i in range(min(len(table), num_tokens // block_size)):
            tokens = tuple(token_ids[i * block_size:(i + 1) * block_size])
            parent = self.chain(parent, tokens)
            block = table[i]
            if self.block_hash.get(block) == parent:
                continue
            self.add(parent, block, tokens)

    def add(self, h: int, block: int, tokens: tuple[int, ...]) -> None:
        """File one full block under hash h (after those filed there); it must have no entry."""
        assert block not in self.block_hash, f"block {block} is filed under another prefix"
        self._save(h, block)
        self.hash_blocks.setdefault(h, {})[block] = None
        self.block_hash[block] = h
        self.block_tokens[block] = tokens

    def evict(self, block: int) -> bool:
        """Drop block's entry (it is about to hold other tokens). Returns whether it had one."""
        h = self.block_hash.get(block)
        if h is None:
            return False
        self._save(h, block)
        del self.block_hash[block], self.block_tokens[block]
        filed = self.hash_blocks[h]
        del filed[block]
        if not filed:
            del self.hash_blocks[h]
        return True

    def _save(self, h: int, block: int) -> None:
        """Journal (when on) what hash h and block held before their first change since then."""
        if self.journal is None:
            return
        hashes, blocks = self.journal
        if h not in hashes:
            filed = self.hash_blocks.get(h)
            hashes[h] = None if filed is None else dict(filed)
        if block not in blocks:
            blocks[block] = (self.block_hash.get(block), self.block_tokens.get(block))

    def start_journal(self) -> None:
        """From now on each change saves what it replaces (a step is checkpointed)."""
        self.journal = ({}, {})

    def stop_journal(self) -> None:
        """Forget the journal (the step succeeded)."""
        self.journal = None

    def undo(self) -> None:
        """Undo the changes since start_journal but one: a block seen losing its entry (taken for
        new contents: the K/V its hash named may be overwritten) stays out of the index.
        O(changes)."""
        if self.journal is None:
            return
        (hashes, blocks), self.journal = self.journal, None
        now = {block: self.block_hash.get(block) for block in blocks}
        for h, filed in hashes.items():
            if filed is None:
                self.hash_blocks.pop(h, None)
            else:
                self.hash_blocks[h] = filed
        for block, (h, tokens) in blocks.items():
            if h is None:
                self.block_hash.pop(block, None)
                self.block_tokens.pop(block, None)
            else:
                self.block_hash[block], self.block_tokens[block] = h, tokens
        for block, (h, _) in blocks.items():
            if h is not None and now[block] != h:
                self.evict(block)

    def copy(self) -> PrefixCache:
        """An independent copy of the index, without a journal."""
        other = PrefixCache()
        other.hash_blocks = {h: dict(b) for h, b in self.hash_blocks.items()}
        other.block_hash, other.block_tokens = dict(self.block_hash), dict(self.block_tokens)
        return other

    def check(self) -> None:
        """Assert the two directions of the index agree."""
        for h, blocks in self.hash_blocks.items():
            assert blocks, f"hash {h} files no block"
            for block in blocks:
                assert self.block_hash.get(block) == h, \
                    f"hash index entry for block {block} is stale"
        assert sum(map(len, self.hash_blocks.values())) == len(self.block_hash), \
            "a filed block is missing"
        assert set(self.block_hash) == set(self.block_tokens), \
            "block hashes and token records disagree"
