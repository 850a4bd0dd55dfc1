"""paged/engine/window_blocks.py's rules the mutation run showed unheld: names in errors, the seed passed on, slide over
a batch with a sequence it does not hold, vLLM's hit rule worked by hand for need = ceil((W - 1) / bs) of 1 and 2,
the exact-fit and chunked allocations, shared hits counted, forks with holes and dangling entries."""

from __future__ import annotations

import pytest

from paged.block_manager import BlockManager
from paged.sequence import Sequence
from paged.chapters.window import HOLE
from paged.engine.window_blocks import WindowBlockManager

pytestmark = pytest.mark.engine

PROMPT = list(range(100, 111))  # 11 tokens, block_size 2: blocks 0-4 full (may hit), block 5 the last token's


def cached_then_evicted(window: int, evicted: tuple[int, ...], prompt=PROMPT) -> tuple[WindowBlockManager, list]:
    """A pool (12 blocks of 2) where `prompt` was prefilled and freed (its full blocks cached on the free queue),
    then the blocks `evicted` (logical indexes) lost their hashes."""
    bm = WindowBlockManager(12, 2, window, watermark=0, enable_prefix_caching=True)
    first = Sequence(0, list(prompt))
    table = list(bm.allocate(first))
    bm.free(first)
    for i in evicted:
        bm.cache.evict(table[i])
    return bm, table


def test_names_and_the_seed():
    """sliding_window and free_early are named at the start of their errors; the seed reaches BlockManager (the
    same first blocks as BlockManager(seed=...))."""
    with pytest.raises(ValueError, match="^sliding_window must"):
        WindowBlockManager(4, 2, 0)
    with pytest.raises(ValueError, match="^free_early must be True or False"):
        WindowBlockManager(4, 2, 3, free_early=1)
    wb, plain = WindowBlockManager(16, 2, 3, seed=5), BlockManager(16, 2, seed=5)
    assert list(wb.free_block_ids) == list(plain.free_block_ids) != list(range(16))


def test_held_counts_every_listed_block_and_slide_skips_an_unknown_sequence():
    """held() counts the non-hole entries; slide over [a sequence not held, a held one] still slides the second."""
    bm = WindowBlockManager(12, 2, 3, watermark=0)
    seq = Sequence(1, list(range(9)))
    table = list(bm.allocate(seq))
    assert bm.held(seq) == 5
    seq.on_prefill_done(5)  # next token 9 reads 7-9: blocks 0-2 (tokens 0-5) wholly before it
    assert bm.slide([Sequence(7, [1]), seq]) == {1: [table[2], table[1], table[0]]}
    assert bm.held(seq) == 2


@pytest.mark.parametrize("window,expected,cached", [
    # W = 3: need 1 block; the rightmost run of 1 is block 4: [H, H, H, H, t4]
    (3, lambda t: [HOLE] * 4 + [t[4]], 10),
    # W = 4: need ceil(3 / 2) = 2; the rightmost run of 2 is blocks 1-2, block 0 before the window: [H, t1, t2]
    (4, lambda t: [HOLE, t[1], t[2]], 6),
])
def test_hit_rule_by_hand_with_block_3_evicted(window, expected, cached):
    """vLLM's find_longest_cache_hit for a sliding window, worked by hand: right to left, the first run of
    ceil((W - 1) / block_size) cached blocks; the blocks before it holes; last_hits marks only the run."""
    bm, table = cached_then_evicted(window, (3,))
    seq = Sequence(1, list(PROMPT))
    got = bm.allocate(seq)
    want = expected(table)
    assert got[:len(want)] == want and HOLE not in got[len(want):] and seq.cached_token_count == cached
    assert bm.last_hits[1] == [b != HOLE for b in want] + [False] * (len(got) - len(want))
    bm.check_invariants()


def test_the_last_tokens_block_never_hits():
    """A 10-token prompt cached whole: its 5th block holds the last token, so only blocks 0-3 may hit (W = 3:
    [H, H, H, t3]) and the last token is computed again."""
    prompt = PROMPT[:10]
    bm, table = cached_then_evicted(3, (), prompt)
    seq = Sequence(1, list(prompt))
    got = bm.allocate(seq)
    assert got[:4] == [HOLE, HOLE, HOLE, table[3]] and seq.cached_token_count == 8


def test_hits_on_free_cached_blocks_count_against_the_free_pool():
    """A pool of 6 blocks, W = 3, block 3 evicted: a prompt of PROMPT + 8 tokens (10 blocks) hits block 4 (cached,
    on the free queue), the 4 before it holes, so it takes 5 fresh blocks + that one = 6: an exact fit, admitted;
    2 tokens more take 7: refused, naming the sequence and the free count."""
    for extra, fits in [(10, False), (8, True)]:
        bm = WindowBlockManager(6, 2, 3, watermark=0, enable_prefix_caching=True)
        first = Sequence(0, list(PROMPT))
        table = list(bm.allocate(first))
        bm.free(first)
        bm.cache.evict(table[3])
        seq = Sequence(1, list(PROMPT) + [1] * extra)
        if not fits:
            with pytest.raises(ValueError, match=r"^sequence 1 needs 7 free blocks but only 6 of 6 are free$"):
                bm.allocate(seq)
            continue
        got = bm.allocate(seq)
        assert bm.num_free_blocks == 0 and got[:5] == [HOLE] * 4 + [table[4]] and HOLE not in got[5:]


def test_a_hit_on_a_block_another_sequence_holds_adds_a_reference():
    """Two sequences with the same prompt at once: the second's hit on a block the first holds makes its count 2."""
    bm = WindowBlockManager(12, 2, 3, watermark=0, enable_prefix_caching=True)
    a, b = Sequence(0, list(PROMPT)), Sequence(1, list(PROMPT))
    ta = list(bm.allocate(a))
    tb = bm.allocate(b)
    assert tb[4] == ta[4] and bm.ref_counts[ta[4]] == 2
    bm.check_invariants()


def test_chunked_allocation_covers_only_the_chunk():
    """allocate(max_new_tokens=3) with no hits takes the blocks of the first 3 tokens only, in a pool of 2."""
    bm = WindowBlockManager(2, 2, 3, watermark=0)
    seq = Sequence(0, list(range(10)))
    assert len(bm.allocate(seq, max_new_tokens=3)) == 2 and bm.num_free_blocks == 0


def test_refusals_name_the_sequence():
    """allocate of a sequence that lists blocks, fork of a sequence holding none or into one holding some: each
    refused, naming the sequence."""
    bm = WindowBlockManager(8, 2, 3, watermark=0)
    listed = Sequence(3, [1, 2])
    listed.block_table = [0]
    with pytest.raises(ValueError, match=r"^sequence 3 already holds blocks \[0\]; free it first$"):
        bm.allocate(listed)
    parent = Sequence(0, [1, 2, 3])
    with pytest.raises(ValueError, match="^cannot fork sequence 0: it holds no blocks$"):
        bm.fork(parent, Sequence(1, [1, 2, 3]))
    bm.allocate(parent)
    held = Sequence(2, [4])
    bm.allocate(held)
    with pytest.raises(ValueError, match="^sequence 2 already holds blocks$"):
        bm.fork(parent, held)


def test_fork_with_holes_and_dangling_entries():
    """A fork shares the parent's live blocks only: holes and (free_early) dangling entries add no reference, the
    child's held() equals the parent's, and freeing both returns the whole pool."""
    bm = WindowBlockManager(10, 2, 3, watermark=0, free_early=True)
    parent = Sequence(0, list(range(9)))
    table = list(bm.allocate(parent))
    parent.on_prefill_done(5)
    bm.slide([parent])  # blocks 0-2 holes, block 3 dangling (freed, still listed), block 4 live
    child = Sequence(1, list(parent.token_ids))
    bm.fork(parent, child)
    assert bm.ref_counts[table[4]] == 2 and bm.ref_counts[table[3]] == 0
    assert bm.held(child) == bm.held(parent) == 1
    bm.free(child)
    bm.free(parent)
    assert bm.num_free_blocks == 10 and not any(bm.ref_counts)


def test_free_early_never_frees_the_block_being_written():
    """W = 1: the window is the newest token alone, in the table's last block: free_early frees the blocks before
    it as the plain rule does and nothing more."""
    bm = WindowBlockManager(10, 2, 1, watermark=0, free_early=True)
    seq = Sequence(0, list(range(7)))
    table = list(bm.allocate(seq))
    seq.on_prefill_done(5)  # 8 tokens, the next (index 7) in block 3
    bm.append_slot(seq)
    assert seq.block_table == table  # the 8th token fits block 3
    seq.cached_token_count = 6  # (as a step with token 6 computed leaves it)
    assert bm.slide([seq]) == {0: [table[2], table[1], table[0]]}
    assert seq.block_table[3] == table[3] and bm.ref_counts[table[3]] == 1


def test_full_blocks_after_the_holes_are_filed():
    """A prompt admitted with holes at the front: its new full blocks after them are filed too, so the same prompt
    again hits its last full block before the last token's (W = 3: [H x 8, block 8], 18 tokens cached)."""
    bm = WindowBlockManager(12, 2, 3, watermark=0, enable_prefix_caching=True)
    first = Sequence(0, list(PROMPT))
    table = list(bm.allocate(first))
    bm.free(first)
    bm.cache.evict(table[3])
    longer = list(PROMPT) + [1] * 8  # 19 tokens: hits block 4 (holes 0-3), blocks 5-8 new and full
    second = Sequence(1, list(longer))
    t2 = list(bm.allocate(second))
    bm.free(second)
    third = Sequence(2, list(longer))
    got = bm.allocate(third)
    assert got[:9] == [HOLE] * 8 + [t2[8]] and third.cached_token_count == 18
