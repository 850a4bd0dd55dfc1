"""The state rule: cached_token_count = K/V written; generated_token_ids = tokens sampled."""

import pytest

from paged.sequence import Sequence, SequenceStatus


def test_prefill_then_decode_counts():
    """After prefill cached == prompt_len with one generated token; each decode step adds exactly one to each."""
    seq = Sequence(0, [1, 2, 3, 4, 5])
    assert seq.cached_token_count == 0 and seq.num_uncached_tokens == 5
    seq.on_prefill_done(42)
    assert seq.cached_token_count == 5 and seq.generated_token_ids == [42] and seq.num_tokens == 6
    for step in range(1, 6):
        assert seq.num_uncached_tokens == 1, "decode feeds exactly the last generated token"
        seq.on_decode_done(100 + step)
        assert seq.cached_token_count == 5 + step and len(seq.generated_token_ids) == 1 + step
    assert seq.last_token_id == 105 and seq.token_ids[-2:] == [104, 105]


def test_recompute_refeeds_generated_tokens():
    """After preemption by recompute, the next prefill re-feeds prompt + generated, then continues the rule."""
    seq = Sequence(0, [1, 2, 3])
    seq.on_prefill_done(7)
    seq.on_decode_done(8)
    seq.block_table = [4]
    seq.reset_for_recompute()
    assert seq.cached_token_count == 0 and seq.block_table == [] and seq.status is SequenceStatus.WAITING
    assert seq.num_uncached_tokens == 5
    seq.on_prefill_done(9)
    assert seq.cached_token_count == 5 and seq.generated_token_ids == [7, 8, 9]


def test_decode_without_prefill_is_an_invariant_violation():
    """on_decode_done demands exactly one uncached token (catches a skipped prefill)."""
    seq = Sequence(0, [1, 2, 3])
    with pytest.raises(AssertionError):
        seq.on_decode_done(1)


def test_derived_properties():
    """blocks needed and last-block fill follow num_tokens and cached_token_count."""
    seq = Sequence(3, list(range(10)))
    assert seq.blocks_needed(4) == 3 and seq.last_block_fill(4) == 0
    seq.block_table = [7, 2, 9]
    seq.on_prefill_done(1)
    assert seq.last_block_fill(4) == 2 and seq.blocks_needed(4) == 3
    with pytest.raises(ValueError, match="empty"):
        Sequence(1, [])
