"""Fault hooks at their edges: the writer's block size for every block size, the stale reader of USE_AFTER_FREE
keeping a row's table while it does not grow (also through apply, step after step), and the identity hook's
padding (none, as int64 slots)."""

import pytest
import torch

from paged.engine.runner import prepare_inputs
from paged.faults import Fault, FaultHook, fault_hook, writer_block_size
from paged.sequence import Sequence

pytestmark = pytest.mark.faults

BS, NUM_BLOCKS = 4, 16


def test_the_buggy_writer_halves_the_block_size():
    """BLOCK_SIZE_MISMATCH's writer believes in half the block size, and in 2 when the real one is 1 (so it
    differs from the reader's for every block size)."""
    assert [writer_block_size(b) for b in (1, 2, 3, 4, 16)] == [2, 1, 1, 2, 8]


def test_use_after_free_keeps_a_row_of_equal_length_stale():
    """A row's table is refreshed only when it grows: a new table of the same length is not seen, and a row in
    the middle that grows is refreshed in place (the rows after it keep theirs)."""
    hook = fault_hook(Fault.USE_AFTER_FREE, BS, BS * NUM_BLOCKS)
    assert hook.read_tables([[1, 2], [3], [4]], decode=True) == [[1, 2], [3], [4]]
    assert hook.read_tables([[7, 8], [3], [4]], decode=True) == [[1, 2], [3], [4]]
    assert hook.read_tables([[7, 8], [3, 5], [4]], decode=True) == [[1, 2], [3, 5], [4]]


def decode_step(tables: list[list[int]]):
    seqs = []
    for i, table in enumerate(tables):
        seq = Sequence(i, list(range(len(table) * BS)))
        seq.block_table, seq.cached_token_count = list(table), len(table) * BS - 1
        seqs.append(seq)
    return prepare_inputs(seqs, BS, False, torch.device("cpu")), [s.block_table for s in seqs]


def test_use_after_free_reads_the_stale_table_through_apply():
    """Through apply, step after step: the second decode, whose row 0 now holds other blocks of the same count,
    still reads through the first step's table."""
    hook = fault_hook(Fault.USE_AFTER_FREE, BS, BS * NUM_BLOCKS)
    first, tables = decode_step([[7, 2]])
    assert hook.apply(first, tables, NUM_BLOCKS).block_tables.tolist() == [[7, 2]]
    second, tables = decode_step([[5, 9]])
    assert hook.apply(second, tables, NUM_BLOCKS).block_tables.tolist() == [[7, 2]]


def test_no_fault_pads_nothing():
    """The identity hook writes no padding rows: its pad slots are an empty int64 tensor."""
    pad = FaultHook(BS, BS * NUM_BLOCKS).pad_slots()
    assert (pad.numel(), pad.dtype) == (0, torch.long)


def test_every_hook_knows_its_pool():
    """Each fault's hook is built for the pool it is given: its block size and number of slots."""
    for fault in [None, *Fault]:
        hook = fault_hook(fault, BS, BS * NUM_BLOCKS)
        assert (hook.block_size, hook.num_slots) == (BS, BS * NUM_BLOCKS)


def test_a_stale_slot_mapping_starts_fresh():
    """STALE_SLOT_MAPPING replays the last write's slots only once there is one: the first write, even of a
    single token, goes where the chain says; a later write of the same size replays it."""
    hook = fault_hook(Fault.STALE_SLOT_MAPPING, BS, BS * NUM_BLOCKS)
    rows, index = torch.tensor([0]), torch.tensor([1])
    assert hook.write_slots(torch.tensor([5]), [[1]], rows, index).tolist() == [5]
    assert hook.write_slots(torch.tensor([9]), [[2]], rows, index).tolist() == [5]
