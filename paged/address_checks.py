"""Boundary checks of the address chain's entry points (paged.addressing): ValueError naming the
value and the rule.

Each entry point (locate, slot_mapping, blocks_needed, validate_block_table(s), address_table,
pad_block_tables, batch_slot_mapping) hands its arguments to its check here first, so addressing.py
holds the arithmetic only; MAX_CONTEXT_LEN bounds every layout made token by token.
"""

from __future__ import annotations

import torch

from .checks import as_int, as_int_list

INT32_RANGE = (-(2**31), 2**31 - 1)
INT64_MAX = 2**63 - 1
# The longest context laid out token by token (slot_mapping, address_table, block tables): far
# beyond any model this tool runs, yet a mistyped 2**40 is refused instead of filling memory.
MAX_CONTEXT_LEN = 1 << 24
# address_table builds one Python object per token: a table to show, not a context
MAX_ADDRESS_TABLE_LEN = 1 << 16


def _used_part(block_table, used: int, block_size: int, what: str) -> list[int]:
    """The table's entries as ints. Raises: ValueError if it has fewer than `used` (for `what`)."""
    table = as_int_list(block_table)
    if used > len(table):
        raise ValueError(f"{what} needs {used} blocks of {block_size}, but the block table has "
                         f"only {len(table)}")
    return table


def _tokens(num_tokens: int, what: str) -> int:
    """num_tokens. Raises: ValueError naming `what` if it is past MAX_CONTEXT_LEN."""
    if num_tokens > MAX_CONTEXT_LEN:
        raise ValueError(f"{what} is past MAX_CONTEXT_LEN ({MAX_CONTEXT_LEN} tokens)")
    return num_tokens


def check_int_tensor(values, name: str) -> torch.Tensor:
    """`values` if it is an integer torch tensor (entries unchecked: that would sync a GPU).
    Raises: ValueError otherwise."""
    if (not isinstance(values, torch.Tensor) or values.is_floating_point() or values.is_complex()
            or values.dtype == torch.bool):
        raise ValueError(f"{name} must be an integer tensor, got {values!r}")
    return values


def check_locate(token_index, block_table, block_size) -> tuple[int, list[int], int]:
    """`locate`'s rules: (token_index, the table as ints, block_size).
    Raises: ValueError unless token_index >= 0, block_size >= 1 and the token's entry is >= 0."""
    block_size = as_int(block_size, "block_size", 1)
    table = as_int_list(block_table)
    token_index = as_int(token_index, "token_index", 0)
    logical_block_id = token_index // block_size
    if logical_block_id >= len(table):
        raise ValueError(
            f"token {token_index} lives in logical block {logical_block_id}, but the block table "
            f"has only {len(table)} entries (covers tokens 0..{len(table) * block_size - 1})")
    if table[logical_block_id] < 0:
        raise ValueError(f"logical block {logical_block_id} of token {token_index} is "
                         f"{table[logical_block_id]} (-1: no physical block)")
    return token_index, table, block_size


def check_span(start, end, block_size) -> tuple[int, int, int]:
    """`slot_mapping`'s scalars: (start, end, block_size) as ints.
    Raises: ValueError unless 0 <= start <= end <= MAX_CONTEXT_LEN and block_size >= 1."""
    block_size = as_int(block_size, "block_size", 1)
    start, end = as_int(start, "start"), as_int(end, "end")
    if not 0 <= start <= end:
        raise ValueError(f"need 0 <= start <= end, got start={start}, end={end}")
    return start, _tokens(end, f"end = {end}"), block_size


def check_slot_table(block_table, start: int, end: int, used: int, block_size: int) -> list[int]:
    """`slot_mapping`'s table as ints: `used` (blocks_needed(end)) entries at least.
    Raises: ValueError if one that tokens [start, end) use is < 0 or has slots past int64."""
    table = _used_part(block_table, used, block_size, f"end = {end}")
    for logical_block_id in range(start // block_size, used if end > start else 0):
        physical_block_id = table[logical_block_id]
        if physical_block_id < 0:
            token = max(start, logical_block_id * block_size)
            raise ValueError(f"token {token} maps to block_table[{logical_block_id}] = "
                             f"{physical_block_id} (-1: no physical block)")
        if (physical_block_id + 1) * block_size - 1 > INT64_MAX:  # its last slot must fit
            raise ValueError(f"block_table[{logical_block_id}] = {physical_block_id}: its slots "
                             f"(physical_block_id * {block_size} + block_offset) do not fit in "
                             "int64")
    return table


def check_table_sizes(num_blocks, block_size, context_len) -> tuple[int, int, int]:
    """`validate_block_table`'s scalars: (num_blocks, block_size, context_len) as ints.
    Raises: ValueError unless num_blocks, block_size >= 1, 1 <= context_len <= MAX_CONTEXT_LEN."""
    block_size = as_int(block_size, "block_size", 1)
    num_blocks = as_int(num_blocks, "num_blocks", 1)
    context_len = as_int(context_len, "context_len", 1)
    return num_blocks, block_size, _tokens(context_len, f"context_len {context_len}")


def check_block_table(block_table, num_blocks: int, block_size: int, context_len: int, used: int,
                      distinct: bool) -> None:
    """`validate_block_table`'s table rules over the first `used` (blocks_needed) entries.
    Raises: ValueError naming an entry missing, outside [0, num_blocks) or (distinct) repeated."""
    table = _used_part(block_table, used, block_size, f"context_len {context_len}")
    seen: dict[int, int] = {}
    for logical_block_id, physical_block_id in enumerate(table[:used]):
        if physical_block_id == -1:  # PAD_SLOT
            raise ValueError(f"block_table[{logical_block_id}] is -1 inside the used part "
                             f"(context_len {context_len} uses logical blocks 0..{used - 1})")
        if not 0 <= physical_block_id < num_blocks:
            raise ValueError(f"block_table[{logical_block_id}] = {physical_block_id} is outside "
                             f"the pool [0, {num_blocks})")
        if distinct and physical_block_id in seen:
            raise ValueError(f"physical block {physical_block_id} appears twice in one block table "
                             f"(logical blocks {seen[physical_block_id]} and {logical_block_id}); "
                             "they would overwrite each other")
        seen[physical_block_id] = logical_block_id


def check_block_tables(block_tables: torch.Tensor, lens: list[int], num_used: list[int],
                       num_blocks: int, block_size: int, tables: list[list[int]]) -> None:
    """`validate_block_tables`' rules in one pass of ints: row b's table, context_len lens[b] and
    num_used[b] blocks (0 for a non-int) as `validate_block_table` checks them.
    Raises: ValueError naming the row and the rule."""
    width = block_tables.shape[-1]  # an empty batch: shape [0]
    if not len(lens) == len(tables) == block_tables.shape[0]:
        raise ValueError(f"{block_tables.shape[0]} block-table rows, {len(lens)} context_lens and "
                         f"{len(tables)} tables: one of each per sequence")
    for row, (table, n, used) in enumerate(zip(tables, lens, num_used)):
        head = (table if used == len(table) else table[:used]) if type(table) is list else []
        if (0 < used <= len(table) <= width and n <= MAX_CONTEXT_LEN and len(set(head)) == used
                and min(head) >= 0 and max(head) < num_blocks):
            continue
        sizes = check_table_sizes(num_blocks, block_size, n)  # as validate_block_table: by entry
        check_block_table(table, *sizes, used, distinct=True)
        raise ValueError(f"batch row {row}: block table {table} does not cover context_len {n} "
                         f"with distinct blocks in [0, {num_blocks}) within the batch's width "
                         f"{width}")


def check_address_table(block_table, context_len) -> tuple[list[int], int]:
    """`address_table`'s own rules: (the table as ints, context_len).
    Raises: ValueError unless 0 <= context_len <= MAX_CONTEXT_LEN and MAX_ADDRESS_TABLE_LEN."""
    table = as_int_list(block_table)
    context_len = _tokens(as_int(context_len, "context_len", 0), f"context_len {context_len}")
    if context_len > MAX_ADDRESS_TABLE_LEN:
        raise ValueError(f"context_len {context_len} is past MAX_ADDRESS_TABLE_LEN "
                         f"({MAX_ADDRESS_TABLE_LEN} tokens): address_table lists every token; use "
                         "slot_mapping for a long context")
    return table, context_len


def check_pad_block_tables(block_tables, width,
                           dtype: torch.dtype) -> tuple[list[list[int]], int]:
    """`pad_block_tables`'s rules: (the tables as lists of ints, width).
    Raises: ValueError unless every entry is an integer within `dtype` and no table is wider."""
    if isinstance(block_tables, (torch.Tensor, str, bytes)) or not hasattr(block_tables,
                                                                           "__iter__"):
        raise ValueError(f"block_tables must be a list of block tables, got "
                         f"{type(block_tables).__name__}")
    tables = [as_int_list(t, f"block_tables[{i}]") for i, t in enumerate(block_tables)]
    width = max((len(t) for t in tables), default=0) if width is None else as_int(width, "width", 0)
    if width > MAX_CONTEXT_LEN:
        raise ValueError(f"width {width} is past MAX_CONTEXT_LEN ({MAX_CONTEXT_LEN}): no table "
                         "needs that many blocks")
    low, high = INT32_RANGE if dtype == torch.int32 else (-INT64_MAX - 1, INT64_MAX)
    for i, t in enumerate(tables):
        if len(t) > width:
            raise ValueError(f"block table {i} has {len(t)} entries, more than the width {width}")
        bad = next((x for x in t if not low <= x <= high), None)
        if bad is not None:
            raise ValueError(f"block_tables[{i}] holds {bad}, which does not fit in {dtype}")
    return tables, width


def check_batch_slots(block_tables: torch.Tensor, rows: torch.Tensor, token_index: torch.Tensor,
                      block_size: int) -> None:
    """`batch_slot_mapping`'s rules for block_tables [B, W], rows [N], token_index [N].
    Raises: ValueError if a token's logical block is beyond W or its entry is -1."""
    logical_block_id = token_index // block_size
    if logical_block_id.numel() and int(logical_block_id.max()) >= block_tables.shape[1]:
        raise ValueError(f"a token's logical block is beyond the block tables' width "
                         f"{block_tables.shape[1]}")
    missing = (block_tables[rows, logical_block_id] < 0).nonzero()
    if missing.numel():
        k = int(missing[0])
        raise ValueError(f"token {int(token_index[k])} of batch row {int(rows[k])} maps to a -1 "
                         "entry of its block table (no physical block)")
