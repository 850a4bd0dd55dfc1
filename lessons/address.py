"""Page 1 · Address translation: the seed article's example and the shared sizes every lesson starts from.

The article's example: block_size 4, block_table [7, 2, 9]; token 5 -> logical block 1, physical block 2, offset 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from paged.addressing import Address, locate, logical_address
from paged.checks import DTYPES, dtype_of  # noqa: F401  (the pages' dtype choices, named here)

SEED_BLOCK_SIZE = 4
SEED_NUM_BLOCKS = 12
SEED_BLOCK_TABLE = (7, 2, 9)
SEED_TOKEN_INDEX = 5
SEED_BATCH = (((7, 2, 9), 10), ((4, 1), 6), ((8, 5, 3, 6), 15))  # (block_table, cached_token_count) of A, B, C

MAX_TABLE = 32   # block-table entries the page accepts
MAX_BLOCK_SIZE = 16
MAX_TOKEN = MAX_TABLE * MAX_BLOCK_SIZE - 1  # the furthest token any accepted table can address


@dataclass(frozen=True)
class MissingEntry:
    """Where the chain stops when a token's logical block is beyond the block table: the first two links exist,
    physical_block_id and slot do not (None)."""

    token_index: int
    logical_block_id: int
    block_offset: int
    entries: int        # len(block_table)
    block_size: int
    physical_block_id: None = None
    slot: None = None

    @property
    def capacity(self) -> int:
        """Tokens the table does address: 0 … capacity - 1."""
        return self.entries * self.block_size


def follow(token_index: int, block_table: Sequence[int], block_size: int) -> Address | MissingEntry:
    """The address chain of one token (paged.addressing.locate), or a MissingEntry when its logical block has no
    entry in `block_table`. Raises ValueError for block_size < 1 or token_index < 0 (as locate does)."""
    logical_block_id, block_offset = logical_address(token_index, block_size)
    if logical_block_id >= len(block_table):
        return MissingEntry(token_index, logical_block_id, block_offset, len(block_table), block_size)
    return locate(token_index, block_table, block_size)
