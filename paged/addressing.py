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

PAD_SLOT = -1  # "no slot, skip": padding in slot_mapping and in padded block tables


@dataclass(frozen=True)
class Address:
    """Every link of the address chain for one token."""

    token_index: int
    logical_block_id: int
    physical_block_id: int
    block_offset: int
    slot: int


def _as_list(block_table) -> list[int]:
    if isinstance(block_table, torch.Tensor):
        return [int(x) for x in block_table.reshape(-1).tolist()]
    return [int(x) for x in block_table]


def check_block_size(block_size: int) -> None:
    """Raise ValueError unless block_size is an integer >= 1."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """How many blocks hold `num_tokens` tokens (ceil division)."""
    check_block_size(block_size)
    return -(-num_tokens // block_size)


def locate(token_index: int, block_table: SequenceT[int] | torch.Tensor, block_size: int) -> Address:
    """Follow the address chain for one token.

    Raises ValueError if block_size < 1, token_index < 0, the token's logical block is beyond the table, or the
    table entry there is -1 (nothing allocated).
    """
    check_block_size(block_size)
    table = _as_list(block_table)
    if token_index < 0:
        raise ValueError(f"token_index must be >= 0, got {token_index}")
    logical_block_id = token_index // block_size
    if logical_block_id >= len(table):
        raise ValueError(
            f"token {token_index} lives in logical block {logical_block_id}, but the block table has only "
            f"{len(table)} entries (covers tokens 0..{len(table) * block_size - 1})")
    physical_block_id = table[logical_block_id]
    if physical_block_id < 0:
        raise ValueError(f"logical block {logical_block_id} of token {token_index} is -1 (no physical block)")
    block_offset = token_index % block_size
    return Address(token_index, logical_block_id, physical_block_id, block_offset,
                   physical_block_id * block_size + block_offset)


def slot_mapping(block_table: SequenceT[int] | torch.Tensor, start: int, end: int, block_size: int,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """Slots for tokens [start, end) of one sequence: a LongTensor [end - start].

    Vectorised form of `locate(...).slot` for each token, so writers and readers share one definition.
    """
    check_block_size(block_size)
    if not 0 <= start <= end:
        raise ValueError(f"need 0 <= start <= end, got start={start}, end={end}")
    table = torch.as_tensor(_as_list(block_table), dtype=torch.long)
    if end > 0 and blocks_needed(end, block_size) > table.numel():
        raise ValueError(f"tokens up to {end - 1} need {blocks_needed(end, block_size)} blocks of {block_size}, "
                         f"but the block table has {table.numel()}")
    token_index = torch.arange(start, end, dtype=torch.long)
    physical = table[token_index // block_size] if end > start else token_index
    if (physical < 0).any():
        bad = int(token_index[physical < 0][0])
        raise ValueError(f"token {bad} maps to a -1 entry of the block table (no physical block)")
    slots = physical * block_size + token_index % block_size
    return slots.to(device) if device is not None else slots


def validate_block_table(block_table: SequenceT[int] | torch.Tensor, num_blocks: int, block_size: int,
                         context_len: int) -> None:
    """The shared boundary check for one sequence's block table.

    Rules (each broken rule raises ValueError naming the value):
    block_size >= 1; num_blocks >= 1; context_len >= 1; the table has at least ceil(context_len / block_size)
    entries; every entry of that used part is in [0, num_blocks) (so no -1 inside it); no physical block appears
    twice in the used part (two logical blocks would overwrite each other). Entries past the used part may be -1.
    """
    check_block_size(block_size)
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 1:
        raise ValueError(f"num_blocks must be an integer >= 1, got {num_blocks!r}")
    if context_len < 1:
        raise ValueError(f"context_len must be >= 1, got {context_len}")
    table = _as_list(block_table)
    used = blocks_needed(context_len, block_size)
    if used > len(table):
        raise ValueError(f"context_len {context_len} needs {used} blocks of {block_size}, "
                         f"but the block table has only {len(table)}")
    seen: dict[int, int] = {}
    for logical_block_id, physical_block_id in enumerate(table[:used]):
        if physical_block_id == PAD_SLOT:
            raise ValueError(f"block_table[{logical_block_id}] is -1 inside the used part "
                             f"(context_len {context_len} uses logical blocks 0..{used - 1})")
        if not 0 <= physical_block_id < num_blocks:
            raise ValueError(f"block_table[{logical_block_id}] = {physical_block_id} is outside the pool "
                             f"[0, {num_blocks})")
        if physical_block_id in seen:
            raise ValueError(f"physical block {physical_block_id} appears twice in one block table (logical blocks "
                             f"{seen[physical_block_id]} and {logical_block_id}); they would overwrite each other")
        seen[physical_block_id] = logical_block_id


def address_table(block_table: SequenceT[int] | torch.Tensor, context_len: int, block_size: int) -> list[Address]:
    """The whole token -> (physical block, offset) table for tokens [0, context_len)."""
    return [locate(i, block_table, block_size) for i in range(context_len)]


def pad_block_tables(block_tables: SequenceT[SequenceT[int]], width: int | None = None,
                     device: torch.device | str | None = None) -> torch.Tensor:
    """Pad ragged block tables with -1 into an int32 tensor [B, max_blocks]."""
    tables = [_as_list(t) for t in block_tables]
    width = max((len(t) for t in tables), default=0) if width is None else width
    out = torch.full((len(tables), max(width, 1)), PAD_SLOT, dtype=torch.int32)
    for i, t in enumerate(tables):
        if len(t) > width:
            raise ValueError(f"block table {i} has {len(t)} entries, more than the width {width}")
        if t:
            out[i, : len(t)] = torch.tensor(t, dtype=torch.int32)
    return out.to(device) if device is not None else out
