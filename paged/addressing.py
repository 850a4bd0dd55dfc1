"""The address chain of PagedAttention, as pure functions: the only place slots are computed.

    logical_block_id  = token_index // block_size
    physical_block_id = block_table[logical_block_id]
    block_offset      = token_index %  block_size
    slot              = physical_block_id * block_size + block_offset

Writing (slot_mapping) and reading (block tables) both go through here, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence as SequenceT

import torch

from .address_checks import (INT64_MAX, MAX_ADDRESS_TABLE_LEN, MAX_CONTEXT_LEN,  # noqa: F401
    check_address_table, check_batch_slots, check_block_table, check_block_tables, check_int_tensor,
    check_locate, check_pad_block_tables, check_slot_table, check_span, check_table_sizes)
from .checks import as_int

PAD_SLOT = -1  # "no slot, skip": padding in slot_mapping and in padded block tables
Table = SequenceT[int] | torch.Tensor  # one sequence's block table


@dataclass(frozen=True)
class Address:
    """Every link of the address chain for one token."""

    token_index: int
    logical_block_id: int
    physical_block_id: int
    block_offset: int
    slot: int


def check_block_size(block_size: int) -> int:
    """block_size as an int. Raises: ValueError unless it is an integer >= 1."""
    return as_int(block_size, "block_size", 1)


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """Blocks that hold `num_tokens` tokens (ceil division).
    Raises: ValueError unless num_tokens >= 0 and block_size >= 1 are integers."""
    return -(-as_int(num_tokens, "num_tokens", 0) // check_block_size(block_size))


def blocks_needed_tensor(num_tokens: torch.Tensor, block_size: int) -> torch.Tensor:
    """blocks_needed of each entry of an integer tensor (same shape, dtype, device).
    Raises: ValueError unless num_tokens is an integer tensor and block_size >= 1."""
    block_size = check_block_size(block_size)
    return -(-check_int_tensor(num_tokens, "num_tokens") // block_size)


def logical_address(token_index: int, block_size: int) -> tuple[int, int]:
    """(logical_block_id, block_offset) of a token: the links without a block table.
    Raises: ValueError unless token_index >= 0 and block_size >= 1 are integers."""
    return divmod(as_int(token_index, "token_index", 0), check_block_size(block_size))


def locate(token_index: int, block_table: Table, block_size: int) -> Address:
    """Follow the address chain for one token.
    Raises: ValueError for a bad size or index, or no table entry >= 0 for the token."""
    token_index, table, block_size = check_locate(token_index, block_table, block_size)
    logical_block_id, block_offset = divmod(token_index, block_size)
    physical_block_id = table[logical_block_id]
    return Address(token_index, logical_block_id, physical_block_id, block_offset,
                   physical_block_id * block_size + block_offset)


def slot_of(token_index: int, block_table: Table, block_size: int) -> int:
    """`locate(...).slot` (the BlockManager's append_slot). Raises: ValueError as `locate`."""
    return locate(token_index, block_table, block_size).slot


def slot_mapping(block_table: Table, start: int, end: int, block_size: int,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """Slots [end - start] int64 of tokens [start, end) of one sequence, `locate(...).slot` each.
    Raises: ValueError unless 0 <= start <= end <= MAX_CONTEXT_LEN and the table covers them."""
    start, end, block_size = check_span(start, end, block_size)
    used = blocks_needed(end, block_size)
    table = check_slot_table(block_table, start, end, used, block_size)
    if end == start:
        return torch.zeros(0, dtype=torch.long, device=device)
    first = start // block_size
    physical = torch.tensor(table[first:used], dtype=torch.long)
    token_index = torch.arange(start, end, dtype=torch.long)
    slots = physical[token_index // block_size - first] * block_size + token_index % block_size
    return slots.to(device) if device is not None else slots


def validate_block_table(block_table: Table, num_blocks: int, block_size: int, context_len: int,
                         distinct: bool = True) -> None:
    """One sequence's block table against the pool: its first blocks_needed(context_len) entries.
    Raises: ValueError unless they exist, lie in [0, num_blocks) and (distinct) repeat no block."""
    num_blocks, block_size, context_len = check_table_sizes(num_blocks, block_size, context_len)
    used = blocks_needed(context_len, block_size)
    check_block_table(block_table, num_blocks, block_size, context_len, used, distinct)


def address_table(block_table: Table, context_len: int, block_size: int) -> list[Address]:
    """`locate` of every token in [0, context_len).
    Raises: ValueError past MAX_ADDRESS_TABLE_LEN (65,536 tokens) or as `locate`."""
    table, context_len = check_address_table(block_table, context_len)
    return [locate(i, table, block_size) for i in range(context_len)]


def block_tables(tables: list[list[int]], width: int | None = None,
                 dtype: torch.dtype = torch.int32) -> torch.Tensor:
    """A batch's tables as [B, width] int, -1 padded (width: the longest, at least 1); unchecked."""
    width = max(1, max(map(len, tables), default=0)) if width is None else max(width, 1)
    rows = [t + [PAD_SLOT] * (width - len(t)) for t in tables]
    return torch.tensor(rows, dtype=dtype).reshape(len(tables), width)


def pad_block_tables(tables: SequenceT[SequenceT[int]], width: int | None = None,
                     device: torch.device | str | None = None,
                     dtype: torch.dtype = torch.int32) -> torch.Tensor:
    """`block_tables` after checks: [B, max_blocks], int32 unless `dtype` says int64.
    Raises: ValueError for a non-integer entry, a table wider than `width` or past `dtype`."""
    tables, width = check_pad_block_tables(tables, width, dtype)
    out = block_tables(tables, width, dtype)
    return out.to(device) if device is not None else out


def batch_slot_mapping(block_tables: torch.Tensor, rows: torch.Tensor, token_index: torch.Tensor,
                       block_size: int) -> torch.Tensor:
    """Slots [N] of token token_index[k] of row rows[k] of block_tables [B, W] (-1 padded).
    Raises: ValueError if a token's logical block is -1 or beyond W."""
    check_batch_slots(block_tables, rows, token_index, block_size)
    physical_block_id = block_tables.long()[rows, token_index // block_size]
    return physical_block_id * block_size + token_index % block_size


def block_slots(physical_block_ids: torch.Tensor, block_size: int) -> torch.Tensor:
    """Every slot of each block: ids [...] int64 -> [..., block_size] (unchecked: kernel tiles)."""
    offsets = torch.arange(block_size, device=physical_block_ids.device)
    return physical_block_ids[..., None] * block_size + offsets


def decode_slots(tables: list[list[int]], token_index: list[int], block_size: int) -> list[int]:
    """`batch_slot_mapping` of one token per sequence in plain ints (a decode step): slots [B].
    Raises: ValueError as batch_slot_mapping, for a token without its physical block."""
    try:
        slots = [t[i // block_size] * block_size + i % block_size
                 for t, i in zip(tables, token_index)]
    except IndexError:  # a logical block past its table
        slots = [PAD_SLOT]
    if slots and min(slots) < 0:  # a -1 entry: batch_slot_mapping names the row
        rows = torch.arange(len(tables))
        batch_slot_mapping(block_tables(tables), rows, torch.tensor(token_index), block_size)
        raise AssertionError("batch_slot_mapping found no row without its physical block")
    return slots


def validate_block_tables(block_tables: torch.Tensor, context_lens: torch.Tensor, num_blocks: int,
                          block_size: int, tables: list[list[int]]) -> None:
    """validate_block_table of each row: block_tables [B, W], context_lens [B], tables as lists.
    Raises: ValueError naming the row and the rule."""
    lens, block_size = context_lens.tolist(), check_block_size(block_size)
    used = [-(-n // block_size) if type(n) is int else 0 for n in lens]  # each row's blocks
    check_block_tables(block_tables, lens, used, num_blocks, block_size, tables)  # one pass
