"""The free queue and the prefix-cache index behind the BlockManager, with vLLM v1's rules (vLLM 0.32).

One idea holds both: **the free queue is also the eviction order.** A free block is either empty (no hash: its
contents will never be looked up again) or cached (a full block still indexed by the hash of the prefix ending with
it, so a later prompt with that prefix can reuse it). The next block taken is the head of the queue; a cached block
taken there is evicted (its hash leaves the index). The rules, each as vLLM 0.32's `BlockPool` /
`FreeKVCacheBlockQueue` apply them, and why:

1. Freed blocks **without a hash go to the head** (reused first): nobody can ever hit them, so reusing them costs
   nothing, and every cached block stays findable a little longer. (With prefix caching off no block has a hash, so
   every freed block goes to the head: the most recently freed block is the next one taken.)
2. Freed blocks **with a hash go to the tail**: the head of the cached part is the least recently used, so
   eviction is LRU. A prefix-cache hit takes its block out of the queue wherever it sits (touch).
3. A request's blocks are freed **last block first**: its tail blocks (the longest, most specific prefixes, least
   likely to be shared) land ahead of its head blocks, so they are evicted first, and the shared start of a
   conversation survives longest.
4. A full block is hashed **as soon as the step that writes its last token is scheduled** (not when the next block
   starts), so a request ending exactly on a block boundary leaves that block findable.
5. A recomputed full block whose hash is already cached is **filed as a second block under the same hash**; a
   lookup returns the first one filed that is still cached. (vLLM does not de-duplicate: a block table is
   append-only, so a block id once handed to a request never changes.)

The queue is an insertion-ordered dict of block ids (O(1) take from the head, removal from the middle, put at
either end): the same order vLLM keeps in a doubly linked list.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Iterable

from .checks import as_int


def initial_order(num_blocks: int, seed: int | None) -> list[int]:
    """The free queue of a new pool: 0, 1, 2, … (vLLM's order), or shuffled by `seed` (demos show scattered blocks;
    the policy never looks at ids, so a shuffled pool is vLLM's pool with its blocks renamed)."""
    order = list(range(num_blocks))
    if seed is not None:
        random.Random(seed).shuffle(order)
    return order


class FreeBlockQueue(OrderedDict):
    """Free physical block ids, head first: the head is the next block taken (rule 1-3 above decide where a freed
    block goes). Iterating gives the ids in the order they will be taken."""

    def take(self) -> int:
        """Pop the head. Raises KeyError when empty (callers check num_free_blocks first)."""
        return self.popitem(last=False)[0]

    def put_front(self, blocks: Iterable[int]) -> None:
        """Put blocks at the head, keeping their order (the first of `blocks` becomes the head)."""
        for block in reversed(list(blocks)):
            self[block] = None
            self.move_to_end(block, last=False)

    def put_back(self, blocks: Iterable[int]) -> None:
        """Put blocks at the tail, in order."""
        for block in blocks:
            self[block] = None

    def release(self, blocks: list[int], cached: Iterable[int]) -> None:
        """Blocks just freed (a request's, last block first: rule 3): those without a hash to the head (rule 1),
        the cached ones to the tail (rule 2), each group keeping its order."""
        cached = set(cached) if not isinstance(cached, (set, dict)) else cached
        self.put_front([b for b in blocks if b not in cached])
        self.put_back([b for b in blocks if b in cached])

    def move_to_front(self, block_ids: list[int], num_blocks: int) -> None:
        """Put these free blocks at the head, in this order (BlockManager.move_to_front: teaching demos). Raises
        ValueError (nothing changed) unless block_ids is a list of integer ids of free blocks, none twice."""
        if isinstance(block_ids, (str, bytes)) or not hasattr(block_ids, "__iter__"):
            raise ValueError(f"block_ids must be a list of physical block ids, got {block_ids!r}")
        ids = [as_int(b, "block id", 0, num_blocks - 1) for b in block_ids]
        if len(set(ids)) != len(ids):
            raise ValueError(f"block_ids {ids} list a physical block twice")
        taken = [b for b in ids if b not in self]
        if taken:
            raise ValueError(f"physical block(s) {taken} are not free (pool has blocks 0..{num_blocks - 1})")
        self.put_front(ids)

    def copy(self) -> FreeBlockQueue:
        return FreeBlockQueue(self)


class PrefixCache:
    """The index: hash of a full block's prefix -> the blocks filed under it (first filed first), and back.

    The hash chains: a block's hash is hash((parent block's hash, its token ids)), so equal hashes mean equal
    prefixes, not only equal blocks. Each block's token ids are kept too, and a lookup compares them, so a hash
    collision can never hand out the wrong K/V.
    """

    def __init__(self) -> None:
        self.hash_blocks: dict[int, dict[int, None]] = {}  # hash -> blocks filed under it, in filing order
        self.block_hash: dict[int, int] = {}  # block -> the hash it is filed under
        self.block_tokens: dict[int, tuple[int, ...]] = {}  # block -> its token ids (collision check)

    @staticmethod
    def chain(parent: int | None, tokens: tuple[int, ...]) -> int:
        return hash((parent, tokens))

    def lookup(self, h: int, tokens: tuple[int, ...]) -> int | None:
        """The first block filed under `h` (rule 5), if its tokens are `tokens`; else None."""
        blocks = self.hash_blocks.get(h)
        block = next(iter(blocks)) if blocks else None
        return block if block is not None and self.block_tokens[block] == tokens else None

    def hits(self, token_ids: list[int], block_size: int) -> list[int]:
        """Cached blocks matching the leading full blocks of `token_ids`, stopping before the block holding the last
        token: that token always runs through the model (its logits are needed), as in vLLM."""
        hits, parent = [], None
        for i in range((len(token_ids) - 1) // block_size):
            tokens = tuple(token_ids[i * block_size:(i + 1) * block_size])
            parent = self.chain(parent, tokens)
            block = self.lookup(parent, tokens)
            if block is None:
                break
            hits.append(block)
        return hits

    def file(self, table: list[int], token_ids: list[int], block_size: int, num_tokens: int) -> None:
        """Index every full block among the first `num_tokens` tokens of a table (those written by the end of the
        step being scheduled: rule 4). A block already filed keeps its entry; a new block whose hash is already
        cached is filed beside the first (rule 5)."""
        parent = None
        for i in range(min(len(table), num_tokens // block_size)):
            tokens = tuple(token_ids[i * block_size:(i + 1) * block_size])
            parent = self.chain(parent, tokens)
            block = table[i]
            if self.block_hash.get(block) == parent:
                continue
            assert block not in self.block_hash, f"block {block} is filed under another prefix"
            self.hash_blocks.setdefault(parent, {})[block] = None
            self.block_hash[block] = parent
            self.block_tokens[block] = tokens

    def evict(self, block: int) -> bool:
        """Drop block's entry (it is about to hold other tokens). Returns whether it had one."""
        h = self.block_hash.pop(block, None)
        if h is None:
            return False
        del self.block_tokens[block]
        filed = self.hash_blocks[h]
        del filed[block]
        if not filed:
            del self.hash_blocks[h]
        return True

    def copy(self) -> PrefixCache:
        other = PrefixCache()
        other.hash_blocks = {h: dict(b) for h, b in self.hash_blocks.items()}
        other.block_hash, other.block_tokens = dict(self.block_hash), dict(self.block_tokens)
        return other

    def check(self) -> None:
        """Assert the two directions of the index agree."""
        for h, blocks in self.hash_blocks.items():
            assert blocks, f"hash {h} files no block"
            for block in blocks:
                assert self.block_hash.get(block) == h, f"hash index entry for block {block} is stale"
        assert sum(map(len, self.hash_blocks.values())) == len(self.block_hash), "a filed block is missing"
        assert set(self.block_hash) == set(self.block_tokens), "block hashes and token records disagree"
