"""The address chain: token -> logical block -> physical block -> offset -> slot."""

import re

import pytest
import torch

from paged.addressing import (PAD_SLOT, Address, address_table, blocks_needed, locate, logical_address,
                              pad_block_tables, slot_mapping, validate_block_table)

pytestmark = pytest.mark.article


def test_seed_example_token_5():
    """block_size 4, table [7, 2, 9]: token 5 -> logical block 1, physical block 2, offset 1 (slot 9)."""
    a = locate(5, [7, 2, 9], 4)
    assert a == Address(token_index=5, logical_block_id=1, physical_block_id=2, block_offset=1, slot=9)


def test_seed_example_full_table():
    """The whole table for tokens 0-9 matches the article's hand-written mapping."""
    expected = [(7, 0), (7, 1), (7, 2), (7, 3), (2, 0), (2, 1), (2, 2), (2, 3), (9, 0), (9, 1)]
    got = [(a.physical_block_id, a.block_offset) for a in address_table([7, 2, 9], 10, 4)]
    assert got == expected
    assert [a.logical_block_id for a in address_table([7, 2, 9], 10, 4)] == [0] * 4 + [1] * 4 + [2] * 2


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
def test_slot_mapping_equals_locate(block_size):
    """The vectorised slot_mapping gives exactly locate(...).slot for every token of any range."""
    table = [5, 0, 11, 3, 8, 1, 7]
    n = min(len(table) * block_size, 23)
    for start, end in [(0, n), (2, n), (n - 1, n), (3, 3)]:
        slots = slot_mapping(table, start, end, block_size)
        assert slots.dtype == torch.long
        assert slots.tolist() == [locate(i, table, block_size).slot for i in range(start, end)]


def test_slot_mapping_accepts_tensor_table():
    """A tensor block table gives the same slots as a list."""
    assert torch.equal(slot_mapping(torch.tensor([7, 2, 9]), 0, 10, 4), slot_mapping([7, 2, 9], 0, 10, 4))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_block_size(bad):
    """block_size < 1 (or not an int) is rejected by name."""
    with pytest.raises(ValueError, match="block_size"):
        locate(0, [1], bad)
    with pytest.raises(ValueError, match="block_size"):
        validate_block_table([1], 4, bad, 1)


def test_locate_beyond_table_and_negative():
    """A token past the table's blocks, a negative index, or a -1 entry are clear errors."""
    with pytest.raises(ValueError, match="only 3 entries"):
        locate(12, [7, 2, 9], 4)
    with pytest.raises(ValueError, match=">= 0"):
        locate(-1, [7, 2, 9], 4)
    with pytest.raises(ValueError, match="-1"):
        locate(4, [7, -1], 4)
    with pytest.raises(ValueError, match="end = 5 needs 2 blocks"):
        slot_mapping([7], 0, 5, 4)
    with pytest.raises(ValueError, match="-1"):
        slot_mapping([7, -1], 0, 5, 4)


@pytest.mark.parametrize("table, num_blocks, context_len, msg", [
    ([7, 2, 9], 10, 13, "needs 4 blocks"),
    ([7, 2, 9], 9, 10, "outside the pool"),
    ([7, -1, 9], 10, 10, "-1 inside the used part"),
    ([7, 2, 7], 10, 10, "appears twice"),
    ([7, 2, 9], 10, 0, "context_len"),
    ([7, 2, 9], 0, 5, "num_blocks"),
    ([-3, 2], 10, 5, "outside the pool"),
])
def test_validate_block_table_rejects(table, num_blocks, context_len, msg):
    """Each rule of the shared boundary check raises a ValueError that names it."""
    with pytest.raises(ValueError, match=msg):
        validate_block_table(table, num_blocks, 4, context_len)


def test_validate_block_table_accepts_padding_past_used_part():
    """-1 padding and unused entries after the used part are fine."""
    validate_block_table([7, 2, 9, PAD_SLOT, PAD_SLOT], 10, 4, 10)
    validate_block_table([7, 2, 9], 10, 4, 12)


def test_blocks_needed_and_padding():
    """ceil division for blocks; ragged tables pad with -1 into int32 [B, max_blocks]."""
    assert [blocks_needed(n, 4) for n in (1, 4, 5, 8, 9)] == [1, 1, 2, 2, 3]
    t = pad_block_tables([[7, 2, 9], [4, 1]])
    assert t.dtype == torch.int32 and t.tolist() == [[7, 2, 9], [4, 1, -1]]


@pytest.mark.parametrize("call", [
    lambda: locate(0, [1.9], 4),
    lambda: locate(0, [True], 4),
    lambda: locate(0, torch.tensor([1.9]), 4),
    lambda: locate(1.0, [1], 4),
    lambda: locate(True, [1], 4),
    lambda: slot_mapping([1.9, 2], 0, 5, 4),
    lambda: slot_mapping([1, 2], 0.0, 5, 4),
    lambda: slot_mapping([1, 2], 0, 5.0, 4),
    lambda: slot_mapping([1, 2], 0, 5, 4.0),
    lambda: validate_block_table([1.9], 4, 4, 1),
    lambda: validate_block_table([1], 4.0, 4, 1),
    lambda: validate_block_table([1], 4, 4, 1.5),
    lambda: validate_block_table([1], True, 4, 1),
    lambda: blocks_needed(5.5, 4),
    lambda: blocks_needed(5, 4.0),
    lambda: pad_block_tables([[1, 2.5]]),
    lambda: pad_block_tables([["1"]]),
    lambda: address_table([1, 2], 5.0, 4),
], ids=lambda f: f.__code__.co_firstlineno)
def test_floats_and_bools_are_not_integers(call):
    """A float or bool where an integer is meant raises ValueError (it used to be truncated: [1.9] became block 1)."""
    with pytest.raises(ValueError, match="integer"):
        call()


def test_numpy_and_tensor_integers_are_integers():
    """numpy ints and one-element integer tensors are accepted wherever an int is meant."""
    import numpy as np

    table = np.array([7, 2, 9])
    assert locate(np.int64(5), table, np.int64(4)).slot == 9
    assert locate(torch.tensor(5), [7, 2, 9], 4).slot == 9
    assert slot_mapping(table, np.int32(4), 6, 4).tolist() == [8, 9]
    validate_block_table(table, np.int64(10), 4, np.int64(10))


@pytest.mark.parametrize("call, msg", [
    (lambda: blocks_needed(-1, 4), "num_tokens must be an integer >= 0"),
    (lambda: slot_mapping([2**62], 0, 1, 4), "do not fit in int64"),
    (lambda: slot_mapping([-5, 2], 0, 2, 4), "-5"),
    (lambda: pad_block_tables([[2**40]]), "does not fit in torch.int32"),
    (lambda: pad_block_tables([[1]], width=-1), "width must be an integer >= 0"),
    (lambda: pad_block_tables(torch.tensor([[1]])), "list of block tables"),
])
def test_out_of_range_integers_are_refused(call, msg):
    """Entries too large for the slot arithmetic or the table dtype, and negative counts, are refused by name
    instead of wrapping around silently."""
    with pytest.raises(ValueError, match=msg):
        call()


@pytest.mark.parametrize("call", [
    lambda: slot_mapping([0], 0, 2**40, 2**40),
    lambda: address_table([0], 2**40, 2**40),
    lambda: validate_block_table([0], 1, 2**40, 2**40),
    lambda: pad_block_tables([[1]], width=2**40),
], ids=["slot_mapping", "address_table", "validate_block_table", "pad_block_tables"])
def test_absurd_lengths_are_refused_before_any_work(call):
    """A context of 2**40 tokens (one huge block) is refused up front, not laid out token by token."""
    with pytest.raises(ValueError, match="MAX_CONTEXT_LEN"):
        call()


def test_one_integer_checker_with_one_message():
    """addressing uses the library's one integer check (paged.checks.as_int): same rules, same message wording
    as a config or a sequence ("must be an integer >= N"); a one-element tensor is an array, not an integer."""
    import paged.addressing
    import paged.checks

    assert paged.addressing.as_int is paged.checks.as_int
    with pytest.raises(ValueError, match=r"^token_index must be an integer >= 0, got -1$"):
        locate(-1, [0], 4)
    with pytest.raises(ValueError, match="token_index must be one integer, got an array of shape"):
        locate(torch.tensor([1]), [0], 4)
    with pytest.raises(ValueError, match="start must be an integer, got 1.0"):
        slot_mapping([0], 1.0, 2, 4)


def test_logical_address_is_the_first_two_links():
    """Token 5 of the seed, block_size 4: logical block 1, offset 1, with no table needed; bad inputs are refused
    by name."""
    assert logical_address(5, 4) == (1, 1) and logical_address(0, 1) == (0, 0) and logical_address(15, 4) == (3, 3)
    for token in range(12):
        a = locate(token, [7, 2, 9], 4)
        assert logical_address(token, 4) == (a.logical_block_id, a.block_offset)
    with pytest.raises(ValueError, match="token_index"):
        logical_address(-1, 4)
    with pytest.raises(ValueError, match="block_size"):
        logical_address(3, 0)



def test_blocks_needed_tensor_is_ceil_division_per_entry():
    """Each entry is ceil(n / block_size), computed here with math.ceil; shape and dtype kept; a float tensor or a
    block_size of 0 is refused."""
    import math

    from paged.addressing import blocks_needed_tensor

    lens = torch.tensor([[0, 1, 15], [16, 17, 1000]], dtype=torch.int32)
    got = blocks_needed_tensor(lens, 16)
    assert got.dtype == torch.int32 and got.tolist() == [[math.ceil(n / 16) for n in row] for row in lens.tolist()]
    with pytest.raises(ValueError, match="integer tensor"):
        blocks_needed_tensor(torch.tensor([1.0]), 16)
    with pytest.raises(ValueError, match="block_size"):
        blocks_needed_tensor(lens, 0)


def test_slot_of_is_locate_slot():
    """slot_of gives locate's slot for every token of a scattered table, and refuses what locate refuses with the
    same message."""
    from paged.addressing import slot_of

    table = [7, 2, 9]
    for i in range(12):
        assert slot_of(i, table, 4) == locate(i, table, 4).slot == table[i // 4] * 4 + i % 4
    for bad in ((12, table, 4), (1, [-1], 4), (-1, table, 4), (1, table, 0), (1, [1.5], 4)):
        with pytest.raises(ValueError) as want:
            locate(*bad)
        with pytest.raises(ValueError, match=re.escape(str(want.value))):
            slot_of(*bad)
