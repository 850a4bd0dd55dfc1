"""paged/chapters/swap.py: the swap pool's bookkeeping (SwapSpace), the block copies between two pools, the config
rules."""

import pytest
import torch

from paged.block_manager import BlockManager
from paged.config import SchedulerConfig
from paged.kv_cache import KVCachePool
from paged.chapters.swap import SwapSpace, copy_blocks_between

from helpers import running_seq

pytestmark = pytest.mark.chapters


def test_swap_out_then_in_keeps_the_cache_and_returns_every_block():
    """A swapped sequence keeps cached_token_count; its logical blocks come back in order, both free lists refill."""
    bm, space = BlockManager(8, 4, watermark=0.0), SwapSpace(5)
    seq = running_seq(bm, 0, 10)  # 3 blocks
    table = list(seq.block_table)
    pairs, released = space.swap_out(seq, bm)
    assert [p[0] for p in pairs] == table and sorted(released) == sorted(table)
    assert seq.block_table == [] and seq.cached_token_count == 10
    assert (bm.num_free_blocks, space.num_free_blocks) == (8, 2)
    back = space.swap_in(seq, bm)
    assert [p[0] for p in back] == [p[1] for p in pairs], "logical block i comes back from the swap block it went to"
    assert seq.block_table == [p[1] for p in back] == bm.tables[0]
    assert (bm.num_free_blocks, space.num_free_blocks) == (5, 5)
    bm.free(seq)
    assert bm.num_free_blocks == 8


def test_swap_refuses_what_does_not_fit_and_changes_nothing():
    """Too few swap blocks, a double swap-out, a swap-in without room: ValueError, nothing moved."""
    bm, space = BlockManager(6, 4, watermark=0.0), SwapSpace(2)
    seq = running_seq(bm, 0, 9)  # 3 blocks > 2 swap blocks
    assert not space.can_swap_out(seq)
    with pytest.raises(ValueError, match="needs 3 swap blocks"):
        space.swap_out(seq, bm)
    assert len(seq.block_table) == 3 and space.num_free_blocks == 2
    small = running_seq(bm, 1, 5)  # 2 blocks
    space.swap_out(small, bm)
    with pytest.raises(ValueError, match="already swapped"):
        space.swap_out(small, bm)
    running_seq(bm, 2, 12)  # takes 3 of the 3 free blocks
    with pytest.raises(ValueError, match="needs 2 blocks to swap in, 0 free"):
        space.swap_in(small, bm)
    assert space.holds(1) and small.block_table == []
    assert space.drop(1) and space.num_free_blocks == 2


def test_copy_blocks_between_moves_exactly_the_listed_blocks():
    """Block a of one pool lands in block b of the other for every pair, every layer, K and V; others untouched."""
    src = KVCachePool(2, 6, 4, 2, 8)
    dst = KVCachePool(2, 3, 4, 2, 8)
    src.key_cache.copy_(torch.randn_like(src.key_cache))
    src.value_cache.copy_(torch.randn_like(src.value_cache))
    nbytes = copy_blocks_between(src, dst, [(5, 0), (1, 2)])
    assert nbytes == 2 * KVCachePool.bytes_per_block(2, 4, 2, 8)
    for cache_src, cache_dst in ((src.key_cache, dst.key_cache), (src.value_cache, dst.value_cache)):
        assert torch.equal(cache_dst[:, 0], cache_src[:, 5]) and torch.equal(cache_dst[:, 2], cache_src[:, 1])
        assert not cache_dst[:, 1].any()


@pytest.mark.parametrize("kwargs, message", [
    (dict(preemption_mode="swapping"), "preemption_mode must be"),
    (dict(preemption_mode="swap"), "needs swap_space >= 1"),
    (dict(preemption_mode="swap", swap_space=-1), "swap_space must be"),
    (dict(preemption_mode="swap", swap_space=2.0), "swap_space must be"),
    (dict(preemption_mode="swap", swap_space=8, enable_chunked_prefill=True), "recompute only"),
])
def test_scheduler_config_refuses_bad_swap_settings(kwargs, message):
    """Each bad swap setting is refused by name; the default stays recompute with no swap pool."""
    with pytest.raises(ValueError, match=message):
        SchedulerConfig(**kwargs)
    assert (SchedulerConfig().preemption_mode, SchedulerConfig().swap_space) == ("recompute", 0)
