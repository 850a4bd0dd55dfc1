"""paged/chapters/swap.py's rules the mutation run showed unheld: check_swap's bounds and messages, SwapSpace's size and
edges (one block, an exact fit, an unknown sequence), a swapped-in table never a prefix hit, snapshot / restore,
copies into a pool of another dtype and the bytes they count."""

from __future__ import annotations

import pytest
import torch

from paged.block_manager import BlockManager
from paged.kv_cache import KVCachePool
from paged.sequence import Sequence
from paged.chapters.swap import MAX_SWAP_BLOCKS, SwapSpace, check_swap, copy_blocks_between
from helpers import running_seq

pytestmark = pytest.mark.chapters


def test_check_swap_bounds_and_messages():
    """swap_space up to MAX_SWAP_BLOCKS is accepted, one more refused; recompute works with chunked prefill; the
    messages say the rule in full, and a non-bool chunked flag is refused by its name."""
    assert check_swap("swap", MAX_SWAP_BLOCKS, False) == MAX_SWAP_BLOCKS
    with pytest.raises(ValueError, match=f"^swap_space must be an integer in \\[0, {MAX_SWAP_BLOCKS}\\]"):
        check_swap("swap", MAX_SWAP_BLOCKS + 1, False)
    assert check_swap("recompute", 0, True) == 0
    with pytest.raises(ValueError, match=r"^preemption_mode 'swap' needs swap_space >= 1 \(blocks of the host swap "
                                         r"pool\)$"):
        check_swap("swap", 0, False)
    with pytest.raises(ValueError, match=r"^preemption_mode 'swap' works with whole-prompt prefill only "
                                         r"\(enable_chunked_prefill=False\): vLLM v1's chunked scheduler preempts by "
                                         r"recompute only$"):
        check_swap("swap", 4, True)
    with pytest.raises(ValueError, match="^enable_chunked_prefill must be True or False"):
        check_swap("swap", 4, "yes")


def test_swap_space_size():
    """A swap pool of 1 block and of MAX_SWAP_BLOCKS is allowed; 0 and one past the maximum are refused by the
    name swap_space."""
    assert SwapSpace(1).num_free_blocks == 1
    assert SwapSpace(MAX_SWAP_BLOCKS).num_blocks == MAX_SWAP_BLOCKS
    for bad in (0, -1, MAX_SWAP_BLOCKS + 1):
        with pytest.raises(ValueError, match="^swap_space must be"):
            SwapSpace(bad)


def test_one_block_swaps_out_an_empty_table_does_not_and_an_exact_fit_swaps_in():
    """A one-block sequence can swap out, one with no blocks cannot; swapping in with exactly as many free blocks
    as it needs works; a swapped-in table is no prefix-cache hit; its messages name the sequence."""
    bm, space = BlockManager(3, 4, watermark=0.0), SwapSpace(4)
    seq = running_seq(bm, 0, 3)  # 1 block
    assert space.can_swap_out(seq) and not space.can_swap_out(Sequence(9, [1]))
    space.swap_out(seq, bm)
    running_seq(bm, 1, 8)  # 2 of the 3 blocks: exactly 1 left
    assert len(space.swap_in(seq, bm)) == 1 and bm.num_free_blocks == 0
    assert bm.last_hits[0] == [False]
    with pytest.raises(ValueError, match="^sequence 0 is not swapped out$"):
        space.swap_in(seq, bm)
    other = Sequence(5, [1, 2])
    space.tables[5] = [0]  # swapped, but given blocks again by mistake
    other.block_table = [2]
    with pytest.raises(ValueError, match=r"^sequence 5 already holds blocks \[2\]$"):
        space.swap_in(other, bm)


def test_drop_of_an_unknown_sequence_returns_nothing():
    """Dropping a sequence the swap pool does not hold changes nothing and returns []."""
    space = SwapSpace(3)
    assert space.drop(7) == [] and space.num_free_blocks == 3


def test_snapshot_and_restore():
    """restore(snapshot()) undoes every swap_out, swap_in and drop since the snapshot, newest first: the free list in
    its order and every swap table as they were."""
    bm, space = BlockManager(8, 4, watermark=0.0), SwapSpace(6)
    first = running_seq(bm, 0, 5)
    space.swap_out(first, bm)
    snap = space.snapshot()
    free, tables = list(space.free_block_ids), {k: list(v) for k, v in space.tables.items()}
    second = running_seq(bm, 1, 9)
    space.swap_out(second, bm)
    space.drop(0)
    space.swap_in(second, bm)
    assert list(space.free_block_ids) != free
    space.restore(snap)
    assert list(space.free_block_ids) == free == [2, 3, 4, 5] and space.tables == tables == {0: [0, 1]}


def test_a_snapshot_records_the_swaps_after_it_not_the_swap_pool():
    """A snapshot of a swap pool of 2**20 blocks copies none of them: it is an empty record that holds one entry per
    swap_out / swap_in / drop after it (a step's rollback costs what the step swapped)."""
    bm, space = BlockManager(8, 4, watermark=0.0), SwapSpace(2**20)
    snap = space.snapshot()
    assert snap == []
    seq = running_seq(bm, 0, 5)
    space.swap_out(seq, bm)
    space.drop(0)
    space.drop(7)  # holds nothing: nothing to record
    assert [kind for kind, _, _ in snap] == ["out", "in"]
    space.restore(snap)
    assert space.num_free_blocks == 2**20 and space.free_block_ids[0] == 0 and space.tables == {}


def test_copy_into_a_pool_of_another_dtype_and_its_bytes():
    """Copying float32 blocks into a float64 pool converts them (same values); no pairs copy 0 bytes; the bytes
    counted are the source's: 2 (K, V) x layers x block_size x heads x head_dim x its element size."""
    src = KVCachePool(2, 4, 2, 1, 4, dtype=torch.float16)
    src.key_cache.copy_(torch.randn_like(src.key_cache))
    src.value_cache.copy_(torch.randn_like(src.value_cache))
    dst = KVCachePool(2, 3, 2, 1, 4, dtype=torch.float64)
    assert copy_blocks_between(src, dst, []) == 0
    assert copy_blocks_between(src, dst, [(3, 1)]) == 2 * 2 * 2 * 1 * 4 * 2
    assert torch.equal(dst.key_cache[:, 1], src.key_cache[:, 3].double())
    assert torch.equal(dst.value_cache[:, 1], src.value_cache[:, 3].double())


def test_copy_indexes_on_the_pools_device():
    """Two pools on the meta device (shape-only): the destination's block indexes are built on its device, where
    index_copy_ needs them (a CPU index is refused there); the bytes are counted as on the CPU."""
    src = KVCachePool(1, 4, 2, 1, 4, device="meta")
    dst = KVCachePool(1, 3, 2, 1, 4, device="meta")
    assert copy_blocks_between(src, dst, [(3, 1), (0, 2)]) == 2 * 2 * 1 * 2 * 1 * 4 * 4
