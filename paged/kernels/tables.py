"""The engine's one-pass block-table check: `validate_block_table`'s rules for a whole batch, in pure Python over
the BlockManager's lists (a set, a min and a max per row, no tensor ops), because it runs every step. Any row it
doubts goes to `validate_block_table` itself for the error, so both refuse exactly the same tables."""

from __future__ import annotations

import torch

from ..addressing import MAX_CONTEXT_LEN, blocks_needed, check_block_size, validate_block_table


def check_block_tables(block_tables: torch.Tensor, context_lens: torch.Tensor, num_blocks: int, block_size: int,
                       tables: list[list[int]]) -> None:
    """`validate_block_table`'s rules for a whole batch: in each row of block_tables [B, W] (-1 padded) the first
    blocks_needed(context_lens[b], block_size) entries exist, lie in [0, num_blocks) and are distinct.

    One pure-Python pass over `tables` (the same tables as lists of ints, as the BlockManager keeps them; per row a
    set, a min and a max, no tensor ops, one sync for context_lens). A row that breaks a rule (or is not a plain
    list) goes to `validate_block_table`, which raises its ValueError naming the entry; if it finds nothing a
    ValueError still names the batch row.
    Raises ValueError too if block_tables, context_lens and tables disagree on B or a row is wider than W."""
    lens = context_lens.tolist()
    width = block_tables.shape[-1]  # an empty batch may come as shape [0]
    if not len(lens) == len(tables) == block_tables.shape[0]:
        raise ValueError(f"{block_tables.shape[0]} block-table rows, {len(lens)} context_lens and {len(tables)} "
                         "tables: one of each per sequence")
    block_size = check_block_size(block_size)
    for row, (table, n) in enumerate(zip(tables, lens)):
        if type(table) is list and type(n) is int and 1 <= n <= MAX_CONTEXT_LEN:
            used = blocks_needed(n, block_size)
            head = table if used == len(table) else table[:used]
            if used <= len(table) <= width and len(set(head)) == used and min(head) >= 0 and max(head) < num_blocks:
                continue
        validate_block_table(table, num_blocks, block_size, n)
        raise ValueError(f"batch row {row}: block table {table} does not cover context_len {n} with distinct "
                         f"blocks in [0, {num_blocks}) within the batch's width {width}")
