"""validate_block_tables (the batch form of validate_block_table) at its edges."""

import pytest
import torch

from paged.addressing import MAX_CONTEXT_LEN
from paged.addressing import validate_block_tables

pytestmark = pytest.mark.kernels


def test_validate_block_tables_rules_at_their_edges():
    """The batch check accepts a row of exactly MAX_CONTEXT_LEN tokens, refuses block id num_blocks (the pool is
    [0, num_blocks)), a table wider than the batch's width (naming the row) and disagreeing batch sizes."""
    block_size = 2**16
    table = list(range(MAX_CONTEXT_LEN // block_size))
    validate_block_tables(torch.tensor([table]), torch.tensor([MAX_CONTEXT_LEN]), len(table), block_size, [table])
    with pytest.raises(ValueError, match=r"outside the pool \[0, 4\)"):
        validate_block_tables(torch.tensor([[4]]), torch.tensor([1]), 4, 4, [[4]])
    with pytest.raises(ValueError, match=r"batch row 0: block table \[0, 1\] does not cover context_len 1"):
        validate_block_tables(torch.tensor([[0]]), torch.tensor([1]), 4, 4, [[0, 1]])
    with pytest.raises(ValueError, match="2 block-table rows, 1 context_lens and 2 tables: one of each per sequence"):
        validate_block_tables(torch.tensor([[0], [1]]), torch.tensor([1]), 4, 4, [[0], [1]])
