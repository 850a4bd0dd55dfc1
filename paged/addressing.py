"""The address chain of PagedAttention, as pure functions.

A sequence's context is logically contiguous; its K/V live in fixed-size physical blocks scattered through one pool.
Reading token `token_index` of a sequence follows one chain:

    logical_block_id  = token_index // block_size
    physical_block_id = block_table[logical_block_id]
    block_offset      = token_index %  block_size
    slot              = physical_block_id * block_size + block_offset

Writing (slot_mapping) and reading (block tables) both go through this module, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence as SequenceT

import torch

from .checks import as_int, as_int_list

PAD_SLOT = -1  # "no slot, skip": padding in slot_mapping and in padded block tables


@dataclass(frozen=True)
class Address:
    """Every link of the address chain for one token."""

    token_index: int
    logical_block_id: int
    physical_block_id: int
    block_offset: int
    slot: int


INT32_RANGE = (-(2**31), 2**31 - 1)
INT64_MAX = 2**63 - 1
# The longest context any function here will lay out token by token (slot_mapping, address_table, block tables):
# far beyond any model this tool runs, yet a mistyped 2**40 is refused instead of filling memory.
MAX_CONTEXT_LEN = 1 << 24


def check_block_size(block_size: int) -> int:
    """block_size as an int; raises ValueError unless it is an integer >= 1."""
    return as_int(block_size, "block_size", 1)


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """How many blocks hold `num_tokens` tokens (ceil division). Raises ValueError unless both are integers,
    num_tokens >= 0 and block_size >= 1."""
    return -(-as_int(num_tokens, "num_tokens", 0) // check_block_size(block_size))


def blocks_needed_tensor(num_tokens: torch.Tensor, block_size: int) -> torch.Tensor:
    """blocks_needed of each entry of an integer tensor (same shape, dtype and device). Raises ValueError unless
    num_tokens is an integer tensor and block_size an integer >= 1; entries unchecked (that would sync a GPU)."""
    block_size = check_block_size(block_size)
    if not isinstance(num_tokens, torch.Tensor) or num_tokens.is_floating_point() or num_tokens.is_complex() \
            or num_tokens.dtype == torch.bool:
        raise ValueError(f"num_tokens must be an integer tensor, got {num_tokens!r}")
    return -(-num_tokens // block_size)


def logical_address(token_index: int, block_size: int) -> tuple[int, int]:
    """The chain's first two links, which need no block table: (logical_block_id, block_offset) of a token.
    Raises ValueError unless token_index >= 0 and block_size >= 1 are integers."""
    return divmod(as_int(token_index, "token_index", 0), check_block_size(block_size))


def _used_part(block_table, num_tokens: int, block_size: int, what: str) -> tuple[list[int], int]:
    """The table's entries as ints and how many of them tokens [0, num_tokens) use (blocks_needed). `what` names
    num_tokens in the errors: ValueError if num_tokens > MAX_CONTEXT_LEN or the table has fewer entries."""
    if num_tokens > MAX_CONTEXT_LEN:
        raise ValueError(f"{what} is past MAX_CONTEXT_LEN ({MAX_CONTEXT_LEN} tokens)")
    table = as_int_list(block_table)
    used = blocks_needed(num_tokens, block_size)
    if used > len(table):
        raise ValueError(f"{what} needs {used} blocks of {block_size}, but the block table has only {len(table)}")
    return table, used


def _chain(token_index: int, block_table: SequenceT[int] | torch.Tensor, block_size: int
           ) -> tuple[int, int, int, int, int]:
    """The address chain's links for one token, checked as `locate` says: (token_index, logical_block_id,
    physical_block_id, block_offset, slot)."""
    block_size = check_block_size(block_size)
    table = as_int_list(block_table)
    token_index = as_int(token_index, "token_index", 0)
    logical_block_id, block_offset = logical_address(token_index, block_size)
    if logical_block_id >= len(table):
        raise ValueError(
            f"token {token_index} lives in logical block {logical_block_id}, but the block table has only "
            f"{len(table)} entries (covers tokens 0..{len(table) * block_size - 1})")
    physical_block_id = table[logical_block_id]
    if physical_block_id < 0:
        raise ValueError(f"logical block {logical_block_id} of token {token_index} is {physical_block_id} "
                         "(-1: no physical block)")
    return (token_index, logical_block_id, physical_block_id, block_offset,
            physical_block_id * block_size + block_offset)


def locate(token_index: int, block_table: SequenceT[int] | torch.Tensor, block_size: int) -> Address:
    """Follow the address chain for one token. Raises ValueError unless block_size >= 1 and token_index >= 0 are
    integers, the table holds integers, and its entry for the token's logical block exists and is >= 0."""
    return Address(*_chain(token_index, block_table, block_size))


def slot_of(token_index: int, block_table: SequenceT[int] | torch.Tensor, block_size: int) -> int:
    """`locate(...).slot` (same checks, same errors) without building the Address (the BlockManager's)."""
    return _chain(token_index, block_table, block_size)[4]


def slot_mapping(block_table: SequenceT[int] | torch.Tensor, start: int, end: int, block_size: int,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """Slots for tokens [start, end) of one sequence: a LongTensor [end - start], `locate(...).slot` of each token.
    Raises ValueError unless 0 <= start <= end <= MAX_CONTEXT_LEN and block_size >= 1 are integers, the table (of
    integers) covers token end - 1, and every entry those tokens use is >= 0 with its slots within int64."""
    block_size = check_block_size(block_size)
    start, end = as_int(start, "start"), as_int(end, "end")
    if not 0 <= start <= end:
        raise ValueError(f"need 0 <= start <= end, got start={start}, end={end}")
    table, used = _used_part(block_table, end, block_size, f"end = {end}")
    if end == start:
        return torch.zeros(0, dtype=torch.long, device=device)
    first = start // block_size
    for logical_block_id in range(first, used):
        physical_block_id = table[logical_block_id]
        if physical_block_id < 0:
            token = max(start, logical_block_id * block_size)
            raise ValueError(f"token {token} maps to block_table[{logical_block_id}] = {physical_block_id} "
                             "(-1: no physical block)")
        if physical_block_id > (INT64_MAX - (block_size - 1)) // block_size:  # its last slot must fit
            raise ValueError(f"block_table[{logical_block_id}] = {physical_block_id}: its slots "
                             f"(physical_block_id * {block_size} + block_offset) do not fit in int64")
    physical = torch.tensor(table[first:used], dtype=torch.long)
    token_index = torch.arange(start, end, dtype=torch.long)
    slots = physical[token_index // block_size - first] * block_size + token_index % block_size
    return slots.to(device) if device is not None else slots


def validate_block_table(block_table: SequenceT[int] | torch.Tensor, num_blocks: int, block_size: int,
                         context_len: int, distinct: bool = True) -> None:
    """The shared boundary check for one sequence's block table; each broken rule raises ValueError naming the value.
    Every size and entry is an integer; block_size, num_blocks >= 1; 1 <= context_len <= MAX_CONTEXT_LEN; the
    used part (the first blocks_needed(context_len) entries) exists, lies in [0, num_blocks) and repeats no block
    (two logical blocks would overwrite each other; distinct=False lifts this for a reader). Past it: anything."""
    block_size = check_block_size(block_size)
    num_blocks = as_int(num_blocks, "num_blocks", 1)
    context_len = as_int(context_len, "context_len", 1)
    table, used = _used_part(block_table, context_len, block_size, f"context_len {context_len}")
    seen: dict[int, int] = {}
    for logical_block_id, physical_block_id in enumerate(table[:used]):
        if physical_block_id == PAD_SLOT:
            raise ValueError(f"block_table[{logical_block_id}] is -1 inside the used part "
                             f"(context_len {context_len} uses logical blocks 0..{used - 1})")
        if not 0 <= physical_block_id < num_blocks:
            raise ValueError(f"block_table[{logical_block_id}] = {physical_block_id} is outside the pool "
                             f"[0, {num_blocks})")
        if distinct and physical_block_id in seen:
            raise ValueError(f"physical block {physical_block_id} appears twice in one block table (logical blocks "
                             f"{seen[physical_block_id]} and {logical_block_id}); they would overwrite each other")
        seen[physical_block_id] = logical_block_id


MAX_ADDRESS_TABLE_LEN = 1 << 16  # address_table builds one Python object per token: a table to show, not a context


def address_table(block_table: SequenceT[int] | torch.Tensor, context_len: int, block_size: int) -> list[Address]:
    """The whole token -> (physical block, offset) table for tokens [0, context_len). Raises ValueError for a
    context_len past MAX_ADDRESS_TABLE_LEN (65,536 tokens) or anything locate refuses."""
    table = as_int_list(block_table)
    context_len = as_int(context_len, "context_len", 0)
    if context_len > MAX_CONTEXT_LEN:
        raise ValueError(f"context_len {context_len} is past MAX_CONTEXT_LEN ({MAX_CONTEXT_LEN} tokens)")
    if context_len > MAX_ADDRESS_TABLE_LEN:
        raise ValueError(f"context_len {context_len} is past MAX_ADDRESS_TABLE_LEN ({MAX_ADDRESS_TABLE_LEN} tokens): "
                         "address_table lists every token; use slot_mapping for a long context")
    return [locate(i, table, block_size) for i in range(context_len)]


def block_tables(tables: list[list[int]], width: int | None = None, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    """A batch's block tables as one tensor [B, width], each row padded with -1 (width: the longest, at least 1).
    Unchecked: the engine hands its BlockManager's own lists of ints; pad_block_tables is the checked form."""
    width = max(1, max(map(len, tables), default=0)) if width is None else max(width, 1)
    return torch.tensor([t + [PAD_SLOT] * (width - len(t)) for t in tables], dtype=dtype).reshape(len(tables), width)


def pad_block_tables(block_tables: SequenceT[SequenceT[int]], width: int | None = None,
                     device: torch.device | str | None = None, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    """`block_tables` after checks: ragged block tables padded with -1 into a tensor [B, max_blocks] (int32 unless
    `dtype` says int64). Raises ValueError for a non-integer entry, a table longer than `width`, or an entry that
    does not fit `dtype`."""
    if isinstance(block_tables, (torch.Tensor, str, bytes)) or not hasattr(block_tables, "__iter__"):
        raise ValueError(f"block_tables must be a list of block tables, got {type(block_tables).__name__}")
    tables = [as_int_list(t, f"block_tables[{i}]") for i, t in enumerate(block_tables)]
    width = max((len(t) for t in tables), default=0) if width is None else as_int(width, "width", 0)
    if width > MAX_CONTEXT_LEN:
        raise ValueError(f"width {width} is past MAX_CONTEXT_LEN ({MAX_CONTEXT_LEN}): no table needs that many blocks")
    low, high = INT32_RANGE if dtype == torch.int32 else (-INT64_MAX - 1, INT64_MAX)
    for i, t in enumerate(tables):
        if len(t) > width:
            raise ValueError(f"block table {i} has {len(t)} entries, more than the width {width}")
        bad = next((x for x in t if not low <= x <= high), None)
        if bad is not None:
            raise ValueError(f"block_tables[{i}] holds {bad}, which does not fit in {dtype}")
    width = max(width, 1)  # (a batch of empty tables still has one column)
    out = torch.tensor([t + [PAD_SLOT] * (width - len(t)) for t in tables], dtype=dtype).reshape(len(tables), width)
    return out.to(device) if device is not None else out


def batch_slot_mapping(block_tables: torch.Tensor, rows: torch.Tensor, token_index: torch.Tensor,
                       block_size: int) -> torch.Tensor:
    """Slots of many tokens of many sequences at once: token token_index[k] of the sequence whose (-1 padded) block
    table is block_tables[rows[k]]. block_tables [B, W] int; rows, token_index [N] int64 -> slots [N] int64.

    The address chain of `locate` / `slot_mapping`, vectorised over the whole batch (tests check it equals
    slot_mapping sequence by sequence). Raises ValueError if a token's logical block is -1 or beyond W.
    """
    logical_block_id = token_index // block_size
    if logical_block_id.numel() and int(logical_block_id.max()) >= block_tables.shape[1]:
        raise ValueError(f"a token's logical block is beyond the block tables' width {block_tables.shape[1]}")
    physical_block_id = block_tables.long()[rows, logical_block_id]
    if (physical_block_id < 0).any():
        k = int((physical_block_id < 0).nonzero()[0])
        raise ValueError(f"token {int(token_index[k])} of batch row {int(rows[k])} maps to a -1 entry of its block "
                         "table (no physical block)")
    return physical_block_id * block_size + token_index % block_size


def decode_slots(tables: list[list[int]], token_index: list[int], block_size: int) -> list[int]:
    """`batch_slot_mapping` for one token per sequence (a decode step), in plain ints: the slot of token
    token_index[b] of the sequence whose table is tables[b]. A token without its physical block raises the
    ValueError of batch_slot_mapping, naming its row."""
    try:
        slots = [table[i // block_size] * block_size + i % block_size for table, i in zip(tables, token_index)]
    except IndexError:  # a logical block past its table
        slots = [-1]
    if slots and min(slots) < 0:  # (a -1 entry gives a negative slot)
        batch_slot_mapping(block_tables(tables), torch.arange(len(tables)), torch.tensor(token_index), block_size)
        raise AssertionError("batch_slot_mapping found no row without its physical block")
    return slots
