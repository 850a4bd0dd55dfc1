"""WindowBlockManager against the real vLLM's KVCacheManager with a SlidingWindowSpec (vLLM 0.32's
SlidingWindowManager), operation for operation: one request prefilled then decoded, and a second one hitting the
first one's cached blocks after some were evicted. After every step the block tables (vLLM's null block 0 is our
HOLE, its block b our b - 1), the free-block count, the free queue's order and the prefix-cache hits must be equal.

Timing: vLLM frees the blocks behind a window at the next allocate_slots of the request; we free them at the end of
the step that moved the window. For one request these are the same state at every allocation, which is where the
two are compared (after our append_slot, after vLLM's allocate_slots). With a second request, or at a request's end,
vLLM would still hold what the last step left behind; so after each step vLLM's own remove_skipped_blocks is called
as its next allocate_slots would call it (docs/window.md: the one difference, when blocks are freed)."""

from __future__ import annotations

import random

import pytest

from paged.sequence import Sequence
from paged.chapters.window import HOLE
from paged.engine.window_blocks import WindowBlockManager

from vllm_util import need_vllm

pytestmark = pytest.mark.engine


def sliding_vllm(num_blocks: int, block_size: int, window: int, caching: bool):
    """A VllmKVCache whose manager is vLLM's own with a SlidingWindowSpec (the same pool: num_blocks + 1 with the
    null block)."""
    import torch
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec, SlidingWindowSpec

    from paged.chapters.vllm_twin import VllmKVCache

    vk = VllmKVCache(num_blocks, block_size, caching)
    spec = SlidingWindowSpec(block_size=block_size, num_kv_heads=1, head_size=8, dtype=torch.float32,
                             sliding_window=window)
    config = KVCacheConfig(num_blocks=num_blocks + 1, kv_cache_tensors=[],
                           kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
    vk.manager = KVCacheManager(config, max_model_len=1 << 20, scheduler_block_size=block_size,
                                hash_block_size=block_size, enable_caching=caching)
    return vk


def vllm_table(vk, seq_id: int) -> list[int]:
    return [HOLE if b == 0 else b - 1 for b in vk.manager.get_block_ids(str(seq_id))[0]]


def check(bm: WindowBlockManager, vk, seq: Sequence, where: str) -> None:
    assert seq.block_table == vllm_table(vk, seq.seq_id), where
    assert bm.num_free_blocks == vk.num_free_blocks, where
    assert list(bm.free_block_ids) == vk.free_queue(), where


def slide_both(bm: WindowBlockManager, vk, seq: Sequence) -> None:
    """The end of a step: our slide; vLLM's remove_skipped_blocks, which its next allocate_slots would run first."""
    bm.slide([seq])
    vk.manager.remove_skipped_blocks(str(seq.seq_id), vk.requests[seq.seq_id].num_computed_tokens)


def run_one(bm: WindowBlockManager, vk, seq: Sequence, decodes: int, rng: random.Random) -> tuple[int, list[int]]:
    """Prefill seq whole, then `decodes` decode steps, comparing after each allocation and each slide. Returns its
    cached_token_count and block table as admitted (the prefix-cache hits)."""
    admitted = (list(bm.allocate(seq)), seq.cached_token_count)
    assert vk.admit(seq.seq_id, seq.token_ids)
    assert seq.cached_token_count == vk.hits[seq.seq_id] * bm.block_size, "prefix-cache hits differ"
    check(bm, vk, seq, f"seq {seq.seq_id} admitted")
    token = rng.randrange(50)
    seq.on_prefill_done(token)
    vk.done(seq.seq_id, token)
    slide_both(bm, vk, seq)
    check(bm, vk, seq, f"seq {seq.seq_id} after its prefill")
    for step in range(decodes):
        bm.append_slot(seq)
        assert vk.grow(seq.seq_id)
        check(bm, vk, seq, f"seq {seq.seq_id} decode {step}")
        token = rng.randrange(50)
        seq.on_decode_done(token)
        vk.done(seq.seq_id, token)
        slide_both(bm, vk, seq)
    return admitted[1], admitted[0]


@pytest.mark.parametrize("window,block_size,caching,hole", [(5, 2, False, False), (8, 4, True, True),
                                                            (3, 1, True, True), (13, 4, True, False)])
def test_window_blocks_match_vllm_sliding_window_manager(window, block_size, caching, hole):
    """Prefill + decodes: the same holes, the same free queue. With caching, a second request repeating the first's
    prompt after a third evicted some of its blocks gets vLLM's sliding-window hit (holes first, then the run)."""
    need_vllm()
    rng = random.Random(window * 31 + block_size)
    bm = WindowBlockManager(24, block_size, window, watermark=0, enable_prefix_caching=caching)
    vk = sliding_vllm(24, block_size, window, caching)
    prompt = [rng.randrange(50) for _ in range(3 * block_size + 1)]
    first = Sequence(0, list(prompt))
    run_one(bm, vk, first, 6, rng)
    bm.free(first), vk.free(0)
    assert list(bm.free_block_ids) == vk.free_queue()
    run_one(bm, vk, Sequence(1, [99] * (2 * block_size)), 3, rng)  # takes (evicts) blocks from the queue's head
    cached, table = run_one(bm, vk, Sequence(2, list(prompt)), 4, rng)
    if caching:  # (checked against vLLM's hits inside run_one; here: the case each parameter set is for)
        assert cached == 3 * block_size
        assert (table[0] == HOLE) == hole  # a short window needs only the run of blocks its window reads
