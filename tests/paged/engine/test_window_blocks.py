"""paged/engine/window_blocks.py: blocks behind the window freed while a sequence runs, holes at the front of its table,
the bookkeeping consistent and nothing leaked; vLLM's sliding-window prefix-cache hit rule."""

from __future__ import annotations

import math

import pytest

from paged.sequence import Sequence
from paged.chapters.window import HOLE
from paged.engine.window_blocks import WindowBlockManager

pytestmark = pytest.mark.engine


def decode_to(bm: WindowBlockManager, seq: Sequence, num_tokens: int, held: list[int]) -> None:
    """Drive seq as the engine does (append a slot, the step's token written, then slide) up to num_tokens."""
    while seq.num_tokens < num_tokens:
        bm.append_slot(seq)
        seq.on_decode_done(7)
        bm.slide([seq])
        held.append(bm.held(seq))


@pytest.mark.parametrize("window,block_size", [(1, 1), (3, 2), (4, 4), (5, 4), (9, 2)])
def test_decode_frees_the_blocks_behind_the_window_and_holds_at_most_the_bound(window, block_size):
    """Decoding 30 tokens: after every step the holes are exactly the blocks wholly before the next token's window
    (counted by hand here), the sequence holds <= ceil(W / bs) + 1 blocks, and freeing returns the whole pool."""
    bm = WindowBlockManager(40, block_size, window, watermark=0)
    seq = Sequence(0, [1, 2, 3])
    bm.allocate(seq)
    seq.on_prefill_done(5)
    bm.slide([seq])
    held = []
    decode_to(bm, seq, 30, held)
    first_read = seq.cached_token_count - window + 1  # the next token's window starts here
    holes = [i for i, b in enumerate(seq.block_table) if b == HOLE]
    assert holes == list(range(max(0, first_read) // block_size))
    assert max(held) <= math.ceil(window / block_size) + 1
    bm.check_invariants()
    bm.free(seq)
    assert bm.num_free_blocks == 40 and not any(bm.ref_counts)
    bm.check_invariants()


def test_freed_blocks_return_to_the_head_of_the_free_queue_last_first():
    """vLLM's _remove_blocks_in_range: the blocks slid past are released backwards and (no hash) taken first."""
    bm = WindowBlockManager(10, 2, 3, watermark=0)
    seq = Sequence(0, list(range(9)))  # blocks for tokens 0-8: five blocks
    table = list(bm.allocate(seq))
    seq.on_prefill_done(5)  # next token 9 reads 7-9: blocks 0-2 (tokens 0-5) are behind the window
    assert bm.slide([seq]) == {0: [table[2], table[1], table[0]]}
    assert seq.block_table == [HOLE, HOLE, HOLE, table[3], table[4]]
    assert list(bm.free_block_ids)[:3] == [table[2], table[1], table[0]]
    assert bm.slide([seq]) == {}  # nothing new behind the window


def test_forked_samples_share_blocks_until_both_slide_past():
    """n > 1: a block shared by two samples goes back to the free queue only once both windows left it."""
    bm = WindowBlockManager(12, 2, 2, watermark=0)
    parent, child = Sequence(0, [1, 2, 3, 4]), Sequence(1, [1, 2, 3, 4])
    table = list(bm.allocate(parent))
    parent.on_prefill_done(9)
    bm.fork(parent, child)
    child.on_prefill_done(8)
    assert bm.slide([parent]) == {}  # block 0 (tokens 0-1) is behind the parent's window, the child still holds it
    assert parent.block_table[0] == HOLE and bm.ref_counts[table[0]] == 1
    assert bm.slide([child]) == {1: [table[0]]}
    bm.check_invariants()
    bm.free(parent), bm.free(child)
    assert bm.num_free_blocks == 12


def fill_and_free(bm: WindowBlockManager, seq_id: int, tokens: list[int]) -> list[int]:
    """Prefill `tokens` (their full blocks hashed), then free them: the blocks stay cached on the free queue."""
    seq = Sequence(seq_id, tokens)
    table = list(bm.allocate(seq))
    bm.free(seq)
    return table


def test_prefix_hit_needs_only_the_blocks_the_window_reads():
    """vLLM's sliding-window hit: with W = 5, block_size 2 a prompt needs the last ceil(4 / 2) = 2 cached blocks
    before its resume point; an evicted first block does not stop the hit (full attention would get 0 hits), and
    the blocks before the run are holes from the start."""
    bm = WindowBlockManager(8, 2, 5, watermark=0, enable_prefix_caching=True)
    prompt = list(range(100, 111))  # 11 tokens: 5 full blocks may hit, never the last token's block
    table = fill_and_free(bm, 0, prompt)
    bm.cache.evict(table[0])  # its hash gone: a full-attention lookup stops at block 0
    seq = Sequence(1, prompt)
    got = bm.allocate(seq)
    assert got[:5] == [HOLE, HOLE, HOLE, table[3], table[4]] and HOLE not in got[5:]
    assert seq.cached_token_count == 10 and bm.last_hits[1][:5] == [False, False, False, True, True]
    bm.check_invariants()
    bm.free(seq)
    assert bm.num_free_blocks == 8


def test_the_run_is_searched_right_to_left_else_the_leading_blocks_hit():
    """Block 3 evicted: the rightmost run of 2 is blocks 1-2, block 0 before it a hole (vLLM's [NULL, 1, 2]).
    Blocks 1 and 3 evicted: no run of 2 anywhere, so the hit is the leading run (block 0 alone), as vLLM returns
    num_contiguous_blocks when no match was found."""
    for evicted, expected, cached in [((3,), lambda t: [HOLE, t[1], t[2]], 6), ((1, 3), lambda t: [t[0]], 2)]:
        bm = WindowBlockManager(8, 2, 5, watermark=0, enable_prefix_caching=True)
        prompt = list(range(100, 111))
        table = fill_and_free(bm, 0, prompt)
        for i in evicted:
            bm.cache.evict(table[i])
        seq = Sequence(1, prompt)
        got = bm.allocate(seq)
        assert got[:len(expected(table))] == expected(table) and seq.cached_token_count == cached, evicted
        assert HOLE not in got[len(expected(table)):]
        bm.check_invariants()


def test_free_early_frees_a_block_its_window_still_reads():
    """The break-it: slide also frees the block the window starts in, and its entry stays in the table (a
    dangling reference); freeing the sequence afterwards still leaves no block leaked or counted twice."""
    bm = WindowBlockManager(10, 2, 3, watermark=0, free_early=True)
    seq = Sequence(0, list(range(9)))
    table = list(bm.allocate(seq))
    seq.on_prefill_done(5)  # next token 9 reads 7-9: block 3 (tokens 6-7) is still read
    assert bm.slide([seq]) == {0: [table[3], table[2], table[1], table[0]]}
    assert seq.block_table[3] == table[3] and bm.ref_counts[table[3]] == 0 and bm.held(seq) == 1
    bm.free(seq)
    assert bm.num_free_blocks == 10 and not any(bm.ref_counts)


def test_refuses_a_window_below_one():
    """window 0 is a ValueError naming sliding_window."""
    with pytest.raises(ValueError, match="sliding_window"):
        WindowBlockManager(4, 2, 0)
