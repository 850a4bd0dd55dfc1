"""Our BlockManager against the real vLLM's KVCacheManager (vLLM 0.32, paged.chapters.vllm_twin), operation for
operation.

Seeded random sequences of add / prefill chunk / decode / finish / preempt-resume / multi-turn follow-up run on both;
after every operation the refusals, free blocks, block tables (vLLM's block b is our b - 1: its block 0 is the null
block; a shuffled pool renames them), the free queue's order, the set of cached (hashed) blocks and the prefix-cache hits must be equal.
"""

from __future__ import annotations

import random

import pytest

from paged.block_manager import BlockManager
from paged.sequence import Sequence

from vllm_util import need_vllm

pytestmark = pytest.mark.chapters


class Pair:
    """One BlockManager and one VllmKVCache, fed the same operations; `check` compares them."""

    def __init__(self, num_blocks, block_size, caching, seed=None):
        from paged.chapters.vllm_twin import VllmKVCache

        self.bm = BlockManager(num_blocks, block_size, watermark=0.0, seed=seed, enable_prefix_caching=caching)
        self.vk = VllmKVCache(num_blocks, block_size, caching, seed=seed)  # the same names for the same blocks
        self.seqs: dict[int, Sequence] = {}  # holding blocks
        self.preempted: dict[int, Sequence] = {}
        self.finished: list[Sequence] = []
        self.next_id, self.log = 0, []

    def admit(self, seq: Sequence, budget: int | None, token: int) -> bool:
        """A new or preempted sequence's first step: prefix hits, then slots for min(uncached, budget) tokens."""
        try:
            self.bm.allocate(seq, max_new_tokens=budget)
            ours = True
        except ValueError:
            ours = False
        theirs = self.vk.admit(seq.seq_id, seq.token_ids, budget)
        assert ours == theirs, f"refusal differs admitting seq {seq.seq_id}: ours {ours}, vLLM {theirs}"
        if ours:
            assert sum(self.bm.last_hits[seq.seq_id]) == self.vk.hits[seq.seq_id], "prefix-cache hits differ"
            self.seqs[seq.seq_id] = seq
            self._ran(seq, seq.num_uncached_tokens if budget is None else min(seq.num_uncached_tokens, budget), token)
        return ours

    def _ran(self, seq: Sequence, n: int, token: int) -> None:
        final = n == seq.num_uncached_tokens
        if seq.cached_token_count == seq.num_tokens - 1 and seq.generated_token_ids:
            seq.on_decode_done(token)
        elif final:
            seq.on_prefill_done(token)
        else:
            seq.on_chunk_done(n)
        self.vk.done(seq.seq_id, token if final else None)

    def step(self, seq: Sequence, chunk: int, token: int) -> bool:
        """A running sequence's next step: a decode (the scheduler's path: append_slot only when a block is needed
        or filled) or its next prompt chunk (ensure_capacity)."""
        bm, n = self.bm, min(seq.num_uncached_tokens, chunk)
        if seq.num_uncached_tokens == 1:
            need = bm.append_needs_block(seq)
            ours = not need or bm.num_free_blocks >= 1
            if ours and (need or bm.fills_block(seq)):
                bm.append_slot(seq)
        else:
            ours = bm.blocks_to_grow(seq, seq.cached_token_count + n) <= bm.num_free_blocks
            if ours:
                bm.ensure_capacity(seq, seq.cached_token_count + n)
        theirs = self.vk.grow(seq.seq_id, n)
        assert ours == theirs, f"refusal differs growing seq {seq.seq_id}: ours {ours}, vLLM {theirs}"
        if ours:
            self._ran(seq, n, token)
        return ours

    def check(self) -> None:
        bm, vk = self.bm, self.vk
        bm.check_invariants()
        assert bm.num_free_blocks == vk.num_free_blocks, "free blocks differ"
        for sid in self.seqs:
            assert bm.tables[sid] == vk.table(sid), f"seq {sid}'s block table differs"
        assert list(bm.free_block_ids) == vk.free_queue(), "free queue order differs"
        assert set(bm.block_hash) == vk.cached_blocks(), "cached (hashed) blocks differ"


def run_ops(pair: Pair, rng: random.Random, num_ops: int, chunked: bool) -> dict[str, int]:
    """Random operations on `pair`, checked after each; returns how often each kind ran (and was refused)."""
    bs = pair.bm.block_size
    bases = [[rng.randrange(1, 50) for _ in range(rng.randrange(1, 4 * bs))] for _ in range(3)]
    counts: dict[str, int] = {}
    for _ in range(num_ops):
        kind = rng.choices(["add", "step", "finish", "preempt", "resume", "follow"], [3, 10, 2, 1, 2, 1])[0]
        budget = rng.choice([None, bs // 2 + 1, 2 * bs]) if chunked else None
        token = rng.randrange(1, 50)
        ok = True
        if kind in ("add", "follow"):
            if kind == "follow" and pair.finished:
                turn = [rng.randrange(1, 50) for _ in range(rng.randrange(1, 2 * bs))]
                prompt = rng.choice(pair.finished).token_ids + turn  # a multi-turn follow-up
            else:
                prompt = rng.choice(bases) + [rng.randrange(1, 50) for _ in range(rng.randrange(0, 2 * bs))]
            seq = Sequence(pair.next_id, prompt)
            pair.next_id += 1
            ok = pair.admit(seq, budget, token)
            if not ok:
                pair.vk.requests.pop(seq.seq_id, None)
        elif kind == "step" and pair.seqs:
            ok = pair.step(rng.choice(list(pair.seqs.values())), budget or 1 << 30, token)
        elif kind == "finish" and pair.seqs:
            seq = pair.seqs.pop(rng.choice(list(pair.seqs)))
            pair.bm.free(seq)
            pair.vk.free(seq.seq_id)
            pair.finished.append(seq)
        elif kind == "preempt" and pair.seqs:
            seq = pair.seqs.pop(max(pair.seqs))  # the newest, as both schedulers pick
            pair.bm.free(seq)
            seq.reset_for_recompute()
            pair.vk.preempt(seq.seq_id)
            pair.preempted[seq.seq_id] = seq
        elif kind == "resume" and pair.preempted:
            seq = pair.preempted[min(pair.preempted)]
            if pair.admit(seq, budget, token):
                del pair.preempted[seq.seq_id]
            else:
                ok = False
        else:
            continue
        counts[kind] = counts.get(kind, 0) + 1
        counts["refused"] = counts.get("refused", 0) + (not ok)
        pair.check()
    return counts


@pytest.mark.parametrize("caching", [True, False], ids=["caching", "no-caching"])
@pytest.mark.parametrize("pool", ["tight", "roomy"])
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
def test_block_manager_equals_vllm_kv_cache_manager(caching, pool, chunked):
    """Same operations, same outcome: every refusal, free-block count, block id, free-queue position, cached block
    and prefix-cache hit equals vLLM's KVCacheManager's after every one of 8 seeded runs of 120 operations."""
    need_vllm()
    totals: dict[str, int] = {}
    for seed in range(8):
        rng = random.Random(seed)
        block_size = rng.choice([2, 4])
        num_blocks = rng.randrange(8, 14) if pool == "tight" else 200
        counts = run_ops(Pair(num_blocks, block_size, caching), rng, 120, chunked)
        for k, v in counts.items():
            totals[k] = totals.get(k, 0) + v
    assert totals.get("preempt", 0) > 0 and totals.get("follow", 0) > 0
    if pool == "tight":
        assert totals["refused"] > 0, "a tight pool must refuse some operations (eviction and preemption paths)"


def test_shuffled_pool_is_vllms_pool_renamed():
    """With our pool's shuffle on, vLLM's block b is our block order[b - 1] (its initial free queue renamed): under
    that naming every table, free-queue position, cached block, refusal and hit still agrees after every operation."""
    need_vllm()
    for seed in range(4):
        run_ops(Pair(10, 2, True, seed=seed), random.Random(100 + seed), 120, chunked=seed % 2 == 1)


def test_prefix_hits_happen_and_match():
    """The comparison is not vacuous: a repeated prompt and a multi-turn follow-up hit cached blocks in both, the
    same number, and a finished request ending exactly on a block boundary leaves its last block findable."""
    need_vllm()
    pair = Pair(16, 4, True)
    first = Sequence(0, list(range(1, 8)))  # 7 tokens; its first decode fills block 1 (tokens 4..7)
    assert pair.admit(first, None, 9)
    assert pair.step(first, 1, 10)  # token 8 (index 7) written: block 1 is full, hashed now
    pair.check()
    pair.bm.free(pair.seqs.pop(0))
    pair.vk.free(0)
    follow = Sequence(1, first.token_ids[:8] + [11])  # 9 tokens: both full blocks hit
    assert pair.admit(follow, None, 3)
    assert sum(pair.bm.last_hits[1]) == pair.vk.hits[1] == 2
    pair.check()
