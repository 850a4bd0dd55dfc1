"""The address chain's rules at their edges: what slot_mapping reads, the int64 / int32 / MAX_CONTEXT_LEN limits
(the last value accepted, the first refused), results on the device asked for, and errors that name the token,
the entry and the rule."""

import pytest
import torch

from paged.addressing import (MAX_ADDRESS_TABLE_LEN, MAX_CONTEXT_LEN, address_table, batch_slot_mapping,
                              block_tables, blocks_needed_tensor, locate, logical_address, pad_block_tables,
                              slot_mapping, validate_block_table)

pytestmark = pytest.mark.article

INT64_MAX = 2**63 - 1


def test_slot_mapping_reads_only_the_blocks_its_tokens_use():
    """Tokens [4, 6) use logical block 1 only: a -1 in block 0 (nothing allocated there) is no error."""
    assert slot_mapping([-1, 5], 4, 6, 4).tolist() == [20, 21]


def test_slot_mapping_names_the_first_token_without_a_block():
    """A -1 entry is reported with the first token of [start, end) that lands on it."""
    with pytest.raises(ValueError, match=r"token 4 maps to block_table\[1\] = -1 \(-1: no physical block\)"):
        slot_mapping([3, -1], 2, 7, 4)
    with pytest.raises(ValueError, match=r"token 2 maps to block_table\[0\] = -1"):
        slot_mapping([-1], 2, 3, 4)


def test_slot_mapping_start_and_end_rules():
    """end must be an integer (named in the error) and 0 <= start <= end."""
    with pytest.raises(ValueError, match="end must be an integer"):
        slot_mapping([1], 0, 1.5, 4)
    with pytest.raises(ValueError, match=r"need 0 <= start <= end, got start=3, end=2"):
        slot_mapping([1], 3, 2, 4)


@pytest.mark.parametrize("block_size", [3, 4])
def test_slot_mapping_int64_edge(block_size):
    """The largest physical block whose last slot fits int64 is accepted (its slots are exact); one more is
    refused."""
    hi = (INT64_MAX + 1) // block_size - 1
    assert hi * block_size + block_size - 1 <= INT64_MAX < (hi + 1) * block_size + block_size - 1
    slots = slot_mapping([hi], 0, block_size, block_size).tolist()
    assert slots == [hi * block_size + k for k in range(block_size)]
    with pytest.raises(ValueError, match="do not fit in int64"):
        slot_mapping([hi + 1], 0, block_size, block_size)


def test_results_land_on_the_device_asked_for():
    """slot_mapping (empty or not) and pad_block_tables return tensors on `device`."""
    assert slot_mapping([1], 0, 2, 4, device="meta").device.type == "meta"
    assert slot_mapping([1], 2, 2, 4, device="meta").device.type == "meta"
    assert pad_block_tables([[1, 2], [3]], device="meta").device.type == "meta"


def test_locate_errors_say_what_the_table_covers():
    """A token past the table is told which tokens the table covers; a -1 entry is named as "no physical block"."""
    with pytest.raises(ValueError, match=r"token 8 lives in logical block 2, .* 2 entries \(covers tokens 0\.\.7\)"):
        locate(8, [3, 1], 4)
    with pytest.raises(ValueError, match=r"logical block 1 of token 5 is -1 \(-1: no physical block\)"):
        locate(5, [3, -1], 4)


def test_logical_address_takes_integer_scalars_only():
    """Integer scalars of any kind (a 0-d tensor too) give (logical_block_id, block_offset), token 0 included;
    floats and negative indexes are refused, naming token_index."""
    assert logical_address(torch.tensor(0), 4) == (0, 0)
    assert logical_address(5, torch.tensor(4)) == (1, 1)
    with pytest.raises(ValueError):
        logical_address(5.0, 4)
    with pytest.raises(ValueError):
        logical_address(5, 4.0)
    with pytest.raises(ValueError, match="token_index must be an integer >= 0"):
        logical_address(-1, 4)


def test_blocks_needed_tensor_refuses_bools():
    """A bool tensor is not a tensor of lengths."""
    with pytest.raises(ValueError, match="integer tensor"):
        blocks_needed_tensor(torch.tensor([True]), 4)


def test_validate_block_table_errors_name_the_rule():
    """num_blocks is named; a short table names context_len and the blocks it needs; a -1 names the logical
    blocks in use; a repeated block names both logical blocks."""
    with pytest.raises(ValueError, match="num_blocks must be an integer >= 1"):
        validate_block_table([0], 0, 4, 1)
    with pytest.raises(ValueError, match="context_len 9 needs 3 blocks of 4, but the block table has only 2"):
        validate_block_table([0, 1], 8, 4, 9)
    with pytest.raises(ValueError, match=r"block_table\[1\] is -1 .*uses logical blocks 0\.\.1\)"):
        validate_block_table([0, -1], 8, 4, 8)
    with pytest.raises(ValueError, match="logical blocks 0 and 2"):
        validate_block_table([7, 1, 7], 8, 4, 12)


def test_a_context_of_max_context_len_tokens_is_not_refused_for_its_length():
    """MAX_CONTEXT_LEN tokens (MAX_ADDRESS_TABLE_LEN for address_table, which lists every token) is the limit
    itself: accepted; one more token is refused."""
    block_size = 2**16
    table = list(range(MAX_CONTEXT_LEN // block_size))
    validate_block_table(table, len(table), block_size, MAX_CONTEXT_LEN)
    with pytest.raises(ValueError, match="MAX_CONTEXT_LEN"):
        validate_block_table(table + [len(table)], len(table) + 1, block_size, MAX_CONTEXT_LEN + 1)
    with pytest.raises(ValueError, match="lives in logical block 0"):  # refused for its table, not its length
        address_table([], MAX_ADDRESS_TABLE_LEN, 1)
    with pytest.raises(ValueError, match="past MAX_ADDRESS_TABLE_LEN"):
        address_table([], MAX_ADDRESS_TABLE_LEN + 1, 1)


def test_address_table_context_len_rules():
    """context_len 0 gives no address; a negative one is refused, naming context_len."""
    assert address_table([1], 0, 4) == []
    with pytest.raises(ValueError, match="context_len must be an integer >= 0"):
        address_table([1], -1, 4)


def test_pad_block_tables_edges():
    """int32 holds [-2**31, 2**31 - 1] and int64 its own range; the first entry outside is named; a table wider
    than `width` and a tensor given for the list are refused with their sizes and type."""
    assert pad_block_tables([[-2**31, 2**31 - 1]]).tolist() == [[-2**31, 2**31 - 1]]
    with pytest.raises(ValueError, match=r"block_tables\[0\] holds 2147483648, which does not fit in torch.int32"):
        pad_block_tables([[-2**31, 2**31 - 1, 2**31]])
    assert pad_block_tables([[-2**63, INT64_MAX]], dtype=torch.int64).tolist() == [[-2**63, INT64_MAX]]
    with pytest.raises(ValueError, match="does not fit in torch.int64"):
        pad_block_tables([[-2**63 - 1]], dtype=torch.int64)
    with pytest.raises(ValueError, match="block table 0 has 3 entries, more than the width 2"):
        pad_block_tables([[1, 2, 3]], width=2)
    with pytest.raises(ValueError, match="got Tensor"):
        pad_block_tables(torch.zeros(2, 2, dtype=torch.int32))


def test_batch_slot_mapping_names_the_token_without_a_block():
    """Physical block 0 is a block like any other; the error names the first token (and its batch row) whose
    logical block is -1."""
    tables = torch.tensor([[0, 1], [2, -1]], dtype=torch.int32)
    rows, index = torch.tensor([0, 1, 1]), torch.tensor([1, 1, 2])
    with pytest.raises(ValueError, match=r"token 2 of batch row 1 maps to a -1 entry of its block table \(no "
                                         r"physical block\)"):
        batch_slot_mapping(tables, rows, index, 2)
    assert batch_slot_mapping(tables, rows[:2], index[:2], 2).tolist() == [1, 5]


def test_a_block_table_that_is_not_a_sequence_of_integers_is_named():
    """A string or a bare number given as a block table is refused, naming block_table."""
    for bad in ("ab", 5):
        with pytest.raises(ValueError, match="block_table must be a sequence of integers"):
            locate(0, bad, 4)


def test_block_tables_pads_to_the_widest_row_and_at_least_one_column():
    """The unchecked batch form: rows padded with -1 to the longest (or the given) width, never fewer than one
    column, int32 unless asked for int64."""
    assert block_tables([[1], [2, 3]]).tolist() == [[1, -1], [2, 3]]
    assert block_tables([[5]]).tolist() == [[5]] and block_tables([[5]], width=1).tolist() == [[5]]
    assert block_tables([[5]], width=3).tolist() == [[5, -1, -1]]
    assert block_tables([[]]).tolist() == [[-1]] and block_tables([[]], width=0).tolist() == [[-1]]
    assert tuple(block_tables([]).shape) == (0, 1)
    assert block_tables([[1]]).dtype == torch.int32 and block_tables([[1]], dtype=torch.int64).dtype == torch.int64


def test_address_table_names_its_own_limit():
    """A context too long to list token by token is refused naming MAX_ADDRESS_TABLE_LEN and what to use instead,
    up to MAX_CONTEXT_LEN itself."""
    for n in (MAX_ADDRESS_TABLE_LEN + 1, MAX_CONTEXT_LEN):
        with pytest.raises(ValueError, match="past MAX_ADDRESS_TABLE_LEN .*address_table lists every token; use "
                                             "slot_mapping for a long context$"):
            address_table([], n, 1)
