"""How each fault of the catalogue is acted out: one `FaultHook` subclass per fault.

Each subclass overrides the one link of the address chain its bug breaks
(`fault_hook(fault, block_size, num_slots)` picks it). The hook without a fault is the identity
and checks the block tables (the bug lab's no-fault case); the runner holds no hook without a fault.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import torch

from ..addressing import batch_slot_mapping, pad_block_tables, validate_block_tables
from ..batch import BatchInput
from ..kv_cache import write_kv
from .catalogue import Fault, as_fault


def writer_block_size(block_size: int) -> int:
    """The block size the buggy writer believes in (BLOCK_SIZE_MISMATCH)."""
    return block_size // 2 if block_size >= 2 else 2


NUM_PAD_ROWS = 3  # PAD_NOT_SKIPPED: padded rows appended to every write


def aliased_tables(tables: list[list[int]]) -> list[list[int]]:
    """ALIASED_BLOCKS: copies of the tables, logical block 1 mapped to block 0's physical block."""
    return [[t[0], t[0], *t[2:]] if len(t) >= 2 else list(t) for t in tables]


class FaultHook:
    """No fault: every link of the chain is the identity, and `apply` checks the block tables.

    A subclass per fault overrides the one link its bug breaks. Links take a step's per-sequence
    block tables (lists of ints), and per fed token its batch row `rows` [N] and token index
    `token_index` [N] (int64, CPU).
    """

    fault: Fault | None = None
    # decode reads history before the step's K/V are written (EARLY_INCREMENT)
    read_first = False
    # Writes may carry -1 slots to skip. Not without a fault: its slots came through the address
    # chain (slot_mapping / batch_slot_mapping refuse -1), so write_kv skips its per-layer search.
    pads = False

    def __init__(self, block_size: int, num_slots: int) -> None:
        self.block_size, self.num_slots = block_size, num_slots
        # the per-row table cache a stale reader keeps (USE_AFTER_FREE only)
        self.rows: list[list[int]] = []

    # --- the links --------------------------------------------------------------------------
    def write_slots(self, slots: torch.Tensor, tables: list[list[int]], rows: torch.Tensor,
                    token_index: torch.Tensor) -> torch.Tensor:
        """Where the writer puts each token, given the correct `slots` [N]: [N] int64."""
        return slots

    def pad_slots(self) -> torch.Tensor:
        """Slots the padding rows of every write land at (none: padding is skipped): [P] int64."""
        return torch.zeros(0, dtype=torch.long)

    def read_tables(self, tables: list[list[int]], decode: bool) -> list[list[int]]:
        """The block tables attention reads through."""
        return tables

    def context_lens(self, lens: torch.Tensor, decode: bool) -> torch.Tensor:
        """Tokens attention reads per sequence, given the correct lens [B]."""
        return lens

    def positions(self, positions: torch.Tensor, decode: bool) -> torch.Tensor:
        """The positions (RoPE) fed with each token, given the correct ones [N]."""
        return positions

    # --- what the two callers (runner, FaultyPlayground) call -------------------------------
    def apply(self, batch: BatchInput, tables: list[list[int]], num_blocks: int) -> BatchInput:
        """The step's inputs as this runner builds them: here (no fault) unchanged, once checked.

        Raises: ValueError if a table breaks a rule against the pool (the message names it).
        """
        validate_block_tables(batch.block_tables, batch.context_lens, num_blocks, self.block_size,
                              tables)
        return batch

    def write(self, key_cache: torch.Tensor, value_cache: torch.Tensor, k: torch.Tensor,
              v: torch.Tensor, slots: torch.Tensor, fast: bool = False) -> None:
        """Write one step's K/V [N, num_kv_heads, head_dim] at `slots` [N] into one layer's caches.

        Unchecked, as on the engine's hot path (a fault must show); fast: write_kv's C copy;
        `pads` says whether to look for -1 slots.
        """
        write_kv(key_cache, value_cache, k, v, slots, validate=False, pads=self.pads, fast=fast)

    def decode(self, write: Callable[[], None], read: Callable[[], torch.Tensor]) -> torch.Tensor:
        """One decode step's write and read in this hook's order (the bug lab's); returns read()."""
        if self.read_first:
            out = read()
            write()
            return out
        write()
        return read()


class _Faulty(FaultHook):
    """A hook with a fault: `apply` rebuilds the inputs through every link and checks nothing."""

    pads = True  # rebuilt slots are written as the bug lab always wrote them: any -1 skipped

    def apply(self, batch: BatchInput, tables: list[list[int]], num_blocks: int) -> BatchInput:
        """The step's inputs with this fault: slots, tables, context_lens, positions via links."""
        decode, device = not batch.is_prefill, batch.slot_mapping.device
        rows = torch.repeat_interleave(torch.arange(len(tables)), torch.tensor(batch.query_lens))
        token_index = batch.positions.cpu()
        slots = self.write_slots(batch.slot_mapping.cpu(), tables, rows, token_index)
        return replace(batch, slot_mapping=slots.to(device),
                       block_tables=pad_block_tables(self.read_tables(tables, decode)).to(device),
                       context_lens=self.context_lens(batch.context_lens, decode),
                       positions=self.positions(batch.positions, decode))


class EarlyIncrement(_Faulty):
    """Decode reads before it writes: the newest token's slot still holds stale K/V when read."""

    fault, read_first = Fault.EARLY_INCREMENT, True


class LateIncrement(_Faulty):
    """Decode reads context_len - 1 tokens (at least 1): the newest token is left out."""

    fault = Fault.LATE_INCREMENT

    def context_lens(self, lens: torch.Tensor, decode: bool) -> torch.Tensor:
        return (lens - 1).clamp_min(1) if decode else lens


class SlotOffByOne(_Faulty):
    """Every write lands one slot further (clamped to the pool's last slot)."""

    fault = Fault.SLOT_OFF_BY_ONE

    def write_slots(self, slots: torch.Tensor, tables: list[list[int]], rows: torch.Tensor,
                    token_index: torch.Tensor) -> torch.Tensor:
        return (slots + 1).clamp_max(self.num_slots - 1)


class BlockSizeMismatch(_Faulty):
    """The writer computes slots with writer_block_size(block_size); the reader with block_size."""

    fault = Fault.BLOCK_SIZE_MISMATCH

    def write_slots(self, slots: torch.Tensor, tables: list[list[int]], rows: torch.Tensor,
                    token_index: torch.Tensor) -> torch.Tensor:
        """The address chain with writer_block_size: [N] int64.

        A logical block past the table's end takes its last entry (each table is stretched to one
        entry per slot it covers, enough for any writer's block size).
        """
        stretched = [t + t[-1:] * (len(t) * self.block_size - len(t)) for t in tables]
        return batch_slot_mapping(pad_block_tables(stretched), rows, token_index,
                                  writer_block_size(self.block_size))


class UseAfterFree(_Faulty):
    """Decode reads through a per-row table cache refreshed only when the row's table grows."""

    fault = Fault.USE_AFTER_FREE

    def read_tables(self, tables: list[list[int]], decode: bool) -> list[list[int]]:
        """At decode, row i's table is refreshed only when sequence i's outgrows it: the bug."""
        if not decode:
            return tables
        for i, table in enumerate(tables):
            if i >= len(self.rows) or len(self.rows[i]) < len(table):
                self.rows[i:i + 1] = [list(table)]
        return self.rows[:len(tables)]


class PositionOffByOne(_Faulty):
    """Decode feeds the newest token at position num_tokens instead of num_tokens - 1."""

    fault = Fault.POSITION_OFF_BY_ONE

    def positions(self, positions: torch.Tensor, decode: bool) -> torch.Tensor:
        return positions + 1 if decode else positions


class PadNotSkipped(_Faulty):
    """Every write carries NUM_PAD_ROWS padding rows of slot -1, which wrap to the last slot."""

    fault = Fault.PAD_NOT_SKIPPED

    def pad_slots(self) -> torch.Tensor:
        """NUM_PAD_ROWS rows of slot -1, wrapped to the pool's last slot: [NUM_PAD_ROWS] int64."""
        # -1, as a negative index reads it
        return torch.full((NUM_PAD_ROWS,), self.num_slots - 1, dtype=torch.long)

    def write(self, key_cache: torch.Tensor, value_cache: torch.Tensor, k: torch.Tensor,
              v: torch.Tensor, slots: torch.Tensor, fast: bool = False) -> None:
        """The real rows, then padding rows (copies of row 0) at pad_slots().

        A separate call, so the collision is deterministic: the padding wins, as it may on a GPU.
        """
        super().write(key_cache, value_cache, k, v, slots, fast)
        pad, n = self.pad_slots().to(k.device), NUM_PAD_ROWS
        write_kv(key_cache, value_cache, k[:1].expand(n, *k.shape[1:]).contiguous(),
                 v[:1].expand(n, *v.shape[1:]).contiguous(), pad, validate=False)


class AliasedBlocks(_Faulty):
    """Writer and reader both map logical block 1 to logical block 0's physical block."""

    fault = Fault.ALIASED_BLOCKS

    def write_slots(self, slots: torch.Tensor, tables: list[list[int]], rows: torch.Tensor,
                    token_index: torch.Tensor) -> torch.Tensor:
        return batch_slot_mapping(pad_block_tables(aliased_tables(tables)), rows, token_index,
                                  self.block_size)

    def read_tables(self, tables: list[list[int]], decode: bool) -> list[list[int]]:
        return aliased_tables(tables)


class StaleSlotMapping(_Faulty):
    """The write's slots are refreshed only when their number changes: same-size steps replay."""

    fault = Fault.STALE_SLOT_MAPPING

    def __init__(self, block_size: int, num_slots: int) -> None:
        super().__init__(block_size, num_slots)
        # the buffer the writer reads, as last refreshed
        self.replayed = torch.zeros(0, dtype=torch.long)

    def write_slots(self, slots: torch.Tensor, tables: list[list[int]], rows: torch.Tensor,
                    token_index: torch.Tensor) -> torch.Tensor:
        """This step's slots [N] if their number changed since the last write, else the last."""
        if self.replayed.shape != slots.shape:
            self.replayed = slots.clone()
        return self.replayed


HOOKS: dict[Fault | None, type[FaultHook]] = {h.fault: h for h in (
    FaultHook, EarlyIncrement, LateIncrement, SlotOffByOne, BlockSizeMismatch, UseAfterFree,
    PositionOffByOne, PadNotSkipped, AliasedBlocks, StaleSlotMapping)}


def fault_hook(fault: Fault | str | None, block_size: int, num_slots: int) -> FaultHook:
    """The hook acting out `fault` (None: the identity) for num_slots slots in blocks of block_size.

    Raises: ValueError if the fault name is unknown.
    """
    return HOOKS[as_fault(fault)](block_size, num_slots)
