"""Block manager: free list, allocate / append_slot / free, budgets, ownership."""

import copy

import pytest

from paged.addressing import locate
from paged.block_manager import BlockManager
from paged.sequence import Sequence

pytestmark = pytest.mark.article


def snapshot(bm: BlockManager):
    return (list(bm.free_block_ids), list(bm.ref_counts), copy.deepcopy(bm.tables))


def test_allocate_for_prompt_and_append_slot_only_when_full():
    """Prefill takes ceil(prompt/block_size) blocks; decode takes a new block only when the last one is full."""
    bm = BlockManager(8, 4)
    seq = Sequence(0, list(range(6)))
    table = bm.allocate(seq)
    assert len(table) == 2 and bm.num_free_blocks == 6 and seq.block_table is table
    seq.on_prefill_done(0)
    slots = []
    for _ in range(6):  # tokens 6..11
        before = len(seq.block_table)
        slot = bm.append_slot(seq)
        assert slot == locate(seq.cached_token_count, seq.block_table, 4).slot
        grew = len(seq.block_table) - before
        assert grew == (1 if seq.cached_token_count == before * 4 else 0)
        slots.append(slot)
        seq.on_decode_done(0)
    assert len(seq.block_table) == 3 and len(set(slots)) == 6
    bm.check_invariants()


def test_seeded_free_list_is_scattered_and_deterministic():
    """A seed shuffles the free list deterministically; no seed keeps 0, 1, 2, …"""
    a, b = BlockManager(32, 4, seed=7), BlockManager(32, 4, seed=7)
    assert list(a.free_block_ids) == list(b.free_block_ids) != list(range(32))
    assert sorted(a.free_block_ids) == list(range(32))
    assert list(BlockManager(5, 4).free_block_ids) == [0, 1, 2, 3, 4]


def test_free_returns_blocks_and_ownership_view():
    """free returns every block to the free list; ownership shows block -> seq id or None."""
    bm = BlockManager(6, 2)
    a, b = Sequence(0, [1, 2, 3]), Sequence(1, [4])
    bm.move_to_front([4, 1])
    bm.allocate(a)
    bm.allocate(b)
    own = bm.ownership()
    assert own[4] == 0 and own[1] == 0 and own.count(1) == 1 and own.count(None) == 3
    assert sorted(bm.free(a)) == [1, 4] and a.block_table == []
    assert bm.num_free_blocks == 5 and bm.ownership().count(None) == 5
    bm.check_invariants()


def test_watermark_keeps_blocks_for_decode():
    """can_allocate keeps watermark_blocks free; allocate itself only needs physical room."""
    bm = BlockManager(10, 4, watermark=0.2)  # 2 blocks held back
    big = Sequence(0, list(range(33)))  # 9 blocks
    assert not bm.can_allocate(big)
    ok = Sequence(1, list(range(32)))  # 8 blocks
    assert bm.can_allocate(ok)


@pytest.mark.parametrize("case", ["too_big", "twice", "not_free", "dup_ids", "no_blocks_append", "double_free",
                                  "unknown_free", "full_pool_append"])
def test_bad_calls_raise_and_change_nothing(case):
    """Every misuse raises a clear ValueError and leaves the manager exactly as it was."""
    bm = BlockManager(4, 2)
    held = Sequence(0, [1, 2, 3])
    bm.move_to_front([3, 0])
    bm.allocate(held)
    gone = Sequence(9, [1])
    bm.allocate(gone)
    bm.free(gone)
    before = snapshot(bm)
    call, msg = {
        "too_big": (lambda: bm.allocate(Sequence(1, list(range(7)))), "needs 4 blocks but only 2"),
        "twice": (lambda: bm.allocate(held), "already holds blocks"),
        "not_free": (lambda: bm.move_to_front([1, 0]), r"block\(s\) \[0\] are not free"),
        "dup_ids": (lambda: bm.move_to_front([1, 1]), "twice"),
        "no_blocks_append": (lambda: bm.append_slot(Sequence(2, [1])), "holds no blocks"),
        "double_free": (lambda: bm.free(gone), "double free"),
        "unknown_free": (lambda: bm.free(Sequence(5, [1])), "unknown sequence 5"),
        "full_pool_append": (None, "pool is full"),
    }[case]
    if case == "full_pool_append":
        other = Sequence(1, [1, 2, 3, 4])
        bm.allocate(other)  # takes the last 2 blocks
        other.on_prefill_done(0)
        before = snapshot(bm)
        call = lambda: bm.append_slot(other)  # noqa: E731
    with pytest.raises(ValueError, match=msg):
        call()
    assert snapshot(bm) == before
    bm.check_invariants()


def test_constructor_validation():
    """num_blocks, block_size and watermark are checked by name."""
    for kwargs, name in [(dict(num_blocks=0, block_size=4), "num_blocks"), (dict(num_blocks=4, block_size=0),
                         "block_size"), (dict(num_blocks=4, block_size=4, watermark=1.5), "watermark")]:
        with pytest.raises(ValueError, match=name):
            BlockManager(**kwargs)


def test_move_to_front_hands_out_exactly_the_drawn_blocks():
    """A demo's drawn table: move_to_front puts the named free blocks first, in order, so allocate (then
    append_slot) takes exactly them; every other free block keeps its place in the free list."""
    bm = BlockManager(8, 2, seed=3)
    order = list(bm.free_block_ids)
    drawn = [order[5], order[0]]
    seq = Sequence(0, [1, 2, 3])
    bm.move_to_front(drawn)
    assert bm.allocate(seq) == drawn
    assert list(bm.free_block_ids) == [b for b in order if b not in drawn]
    bm.move_to_front([order[7]])
    seq.on_prefill_done(0)
    seq.on_decode_done(0)
    bm.append_slot(seq)
    assert seq.block_table == drawn + [order[7]]
    bm.check_invariants()


def test_append_needs_blocks_is_append_needs_block_of_each():
    """The batch form the scheduler asks each decode step gives, row by row, what append_needs_block gives, through
    a sequence with room in its last block, one whose last block is full, and forked children that share a partly
    filled last block (copy-on-write needed) until one of them copies it."""
    bm = BlockManager(12, 4)
    room, full, parent = Sequence(0, [1] * 5), Sequence(1, [2] * 7), Sequence(2, [3] * 6)
    for seq in (room, full, parent):
        bm.allocate(seq)
        seq.on_prefill_done(9)
    bm.append_slot(full)  # full: 7 cached of 8 slots, the decode fills its last block
    full.on_decode_done(9)
    child = Sequence(3, [3] * 6)
    bm.fork(parent, child)
    child.on_prefill_done(9)
    seqs = [room, full, parent, child]
    want = [False, True, True, True]  # full: 8 of 8 cached; parent and child share their last block
    assert [bm.append_needs_block(s) for s in seqs] == want and bm.append_needs_blocks(seqs) == want
    bm.append_slot(child)  # the child copies the shared block: the parent's last block is its own again
    assert bm.append_needs_blocks(seqs) == [bm.append_needs_block(s) for s in seqs] == [False, True, False, False]
    assert bm.append_needs_blocks([]) == []
