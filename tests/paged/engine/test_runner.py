"""The runner's batched inputs follow the address chain: slots, positions and ids equal the per-sequence definitions
(paged.addressing.slot_mapping, range(cached_token_count, num_tokens)), for any mix of sequences."""

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from paged.addressing import batch_slot_mapping, pad_block_tables, slot_mapping
from paged.block_manager import BlockManager
from paged.engine.runner import prepare_inputs
from paged.sequence import Sequence

pytestmark = pytest.mark.engine


def make_seqs(rng: random.Random, specs, block_size, num_blocks=4096):
    """Sequences with scattered, disjoint block tables covering their tokens; spec = (prompt_len, generated, cached)."""
    ids = list(range(num_blocks))
    rng.shuffle(ids)
    seqs, at = [], 0
    for i, (prompt_len, generated, cached) in enumerate(specs):
        seq = Sequence(i, [rng.randrange(256) for _ in range(prompt_len)])
        seq.generated_token_ids = [rng.randrange(256) for _ in range(generated)]
        seq.cached_token_count = cached
        need = -(-seq.num_tokens // block_size) + rng.randrange(2)  # sometimes one spare block at the end
        seq.block_table, at = ids[at:at + need], at + need
        seqs.append(seq)
    return seqs


@settings(max_examples=60, deadline=None)
@given(data=st.data(), block_size=st.sampled_from([1, 2, 4, 16]), prefill=st.booleans())
def test_prepare_inputs_equals_the_per_sequence_chain(data, block_size, prefill):
    """Every fed token's id, position and slot equal what the sequence and addressing.slot_mapping say; the tables
    are each sequence's, -1 padded to the widest."""
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    specs = []
    for _ in range(data.draw(st.integers(1, 6))):
        prompt_len, generated = data.draw(st.integers(1, 40)), data.draw(st.integers(0 if prefill else 1, 20))
        n = prompt_len + generated
        cached = data.draw(st.integers(0, n - 1)) if prefill else n - 1
        specs.append((prompt_len, generated, cached))
    seqs = make_seqs(rng, specs, block_size)
    batch = prepare_inputs(seqs, block_size, prefill, torch.device("cpu"))
    ids, pos, slots = [], [], []
    for seq in seqs:
        start, end = seq.cached_token_count, seq.num_tokens
        ids += seq.token_ids[start:end]
        pos += list(range(start, end))
        slots += slot_mapping(seq.block_table, start, end, block_size).tolist()
    assert batch.input_ids.tolist() == ids and batch.positions.tolist() == pos
    assert batch.slot_mapping.tolist() == slots
    assert batch.context_lens.tolist() == [s.num_tokens for s in seqs]
    assert batch.query_lens == [s.num_tokens - s.cached_token_count for s in seqs]
    width = max(len(s.block_table) for s in seqs)
    assert batch.block_tables.tolist() == [s.block_table + [-1] * (width - len(s.block_table)) for s in seqs]
    assert batch.block_tables.dtype == torch.int32 and batch.is_prefill == prefill


def test_batch_slot_mapping_refuses_padding_and_width():
    """A token whose logical block is -1 (padding) or beyond the tables' width is a ValueError, never a slot."""
    tables = torch.tensor([[3, 1, -1], [0, 2, 4]], dtype=torch.int32)
    assert batch_slot_mapping(tables, torch.tensor([0, 1]), torch.tensor([5, 9]), 4).tolist() == [1 * 4 + 1, 4 * 4 + 1]
    with pytest.raises(ValueError, match="-1 entry"):
        batch_slot_mapping(tables, torch.tensor([0]), torch.tensor([8]), 4)
    with pytest.raises(ValueError, match="beyond the block tables' width 3"):
        batch_slot_mapping(tables, torch.tensor([1]), torch.tensor([12]), 4)


def test_ownership_names_the_first_holder_of_shared_blocks():
    """ownership: block -> the first sequence (in allocation order) whose table holds it; None when free."""
    bm = BlockManager(6, 2)
    parent, child, other = Sequence(0, [1, 2, 3]), Sequence(1, [1, 2, 3]), Sequence(2, [7])
    bm.move_to_front([4, 1, 0])
    bm.allocate(parent)
    bm.fork(parent, child)
    bm.allocate(other)
    assert bm.ownership() == [2, 0, None, None, 0, None]
    bm.free(parent)
    assert bm.ownership() == [2, 1, None, None, 1, None]


@pytest.mark.parametrize("tables, width, expected", [
    ([[7, 2, 9], [4, 1], []], None, [[7, 2, 9], [4, 1, -1], [-1, -1, -1]]),
    ([[], []], None, [[-1], [-1]]),  # nothing allocated yet: one column of padding
    ([], None, []),
    ([[3]], 4, [[3, -1, -1, -1]]),
    ([[2**40, 1]], None, [[2**40, 1]]),  # fits int64
])
def test_pad_block_tables_edges(tables, width, expected):
    """Ragged tables pad with -1 to the widest (or `width`) in one tensor, int64 when asked; shapes of the empty
    cases are [B, 1] and [0, 1]."""
    dtype = torch.int64 if any(x > 2**31 for t in tables for x in t) else torch.int32
    out = pad_block_tables(tables, width=width, dtype=dtype)
    assert out.dtype == dtype and out.tolist() == expected
    assert out.shape == (len(tables), max(len(expected[0]) if expected else 1, 1))


@pytest.mark.parametrize("tables, message", [
    ([[1, True]], "must be an integer, got the bool"),
    ([[1], [2.0]], "must be an integer"),
    ([[1], [2, 2**40]], r"block_tables\[1\] holds 1099511627776, which does not fit in torch.int32"),
    ([(1, 2), [3, -(2**31) - 1]], r"block_tables\[1\] holds"),
])
def test_pad_block_tables_refuses_what_plain_lists_of_ints_would_hide(tables, message):
    """The fast path (plain lists of ints) must not let a bool, a float or an out-of-range entry through."""
    with pytest.raises(ValueError, match=message):
        pad_block_tables(tables)


def test_decode_inputs_refuse_a_token_without_a_block():
    """At decode, a last token whose logical block the table lacks is a ValueError, never a slot; the contiguous
    layout feeds the same token at -1 (skipped) slots."""
    from paged.engine.runner import prepare_inputs

    seq = Sequence(0, [5, 6, 7, 8])
    seq.on_prefill_done(9)  # token index 4: logical block 2 of block_size 2
    seq.block_table = [3, 1]
    with pytest.raises(ValueError, match="beyond the block tables' width 2"):
        prepare_inputs([seq], 2, False, torch.device("cpu"))
    other = Sequence(1, [1, 2])
    other.on_prefill_done(4)
    other.block_table = [0, 5, 6]
    with pytest.raises(ValueError, match="-1 entry"):
        prepare_inputs([seq, other], 2, False, torch.device("cpu"))
    for entry in (-1, -2):  # an entry of the table itself that names no physical block, in the second row
        seq.block_table = [3, 1, entry]
        with pytest.raises(ValueError, match="token 4 of batch row 1 maps to a -1 entry"):
            prepare_inputs([other, seq], 2, False, torch.device("cpu"))
    batch = prepare_inputs([seq], 2, False, torch.device("cpu"), paged=False)
    assert batch.slot_mapping.tolist() == [-1] and batch.input_ids.tolist() == [9] and batch.positions.tolist() == [4]
