"""Sequence's smaller rules: ids are integers >= 0, a chunk is never empty and never the last one, blocks needed
for a given length, and how full the last block is."""

import pytest

from paged.sequence import Sequence

pytestmark = pytest.mark.article


@pytest.mark.parametrize("field", ["seq_id", "request_id"])
def test_negative_ids_are_refused(field):
    """seq_id and request_id are integers >= 0: -1 is refused with a ValueError naming the field."""
    kwargs = {"request_id": -1} if field == "request_id" else {}
    with pytest.raises(ValueError, match=f"{field} must be an integer >= 0"):
        Sequence(-1 if field == "seq_id" else 0, [1, 2], **kwargs)
    assert Sequence(0, [1], request_id=0).request_id == 0  # 0 itself is a valid id


def test_a_chunk_is_never_empty_nor_the_whole_rest():
    """on_chunk_done is for non-final chunks: 0 tokens, or every uncached token (the final chunk, which samples and
    goes through on_prefill_done), are invariant violations that say so; the largest non-final chunk leaves one
    token."""
    seq = Sequence(0, list(range(10)))
    with pytest.raises(AssertionError, match="^a non-final chunk leaves at least one token uncached$"):
        seq.on_chunk_done(0)
    with pytest.raises(AssertionError, match="^a non-final chunk leaves at least one token uncached$"):
        seq.on_chunk_done(10)
    seq.on_chunk_done(9)
    assert seq.num_uncached_tokens == 1


def test_blocks_needed_for_a_given_length():
    """blocks_needed(block_size, num_tokens) counts blocks for that many tokens, not for the sequence's own."""
    seq = Sequence(0, list(range(5)))
    assert seq.blocks_needed(4) == 2
    assert (seq.blocks_needed(4, 9), seq.blocks_needed(4, 8), seq.blocks_needed(4, 1)) == (3, 2, 1)


def test_last_block_fill_before_anything_is_cached():
    """Blocks allocated for a prompt not yet fed hold no cached token: the last block's fill is 0, then it follows
    cached_token_count (a full block counts block_size)."""
    seq = Sequence(0, list(range(8)))
    seq.block_table = [3, 1]
    assert seq.last_block_fill(4) == 0
    seq.on_chunk_done(5)
    assert seq.last_block_fill(4) == 1
    seq.on_prefill_done(7)
    assert seq.last_block_fill(4) == 4


def test_decode_before_its_prefill_says_what_it_expected():
    """on_decode_done on a sequence with more than one uncached token (its prefill never ran) names the rule."""
    with pytest.raises(AssertionError, match="^decode expects exactly one uncached token$"):
        Sequence(0, [1, 2, 3]).on_decode_done(4)
