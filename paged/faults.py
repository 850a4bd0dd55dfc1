"""Classic silent bugs of a paged KV cache, injectable one at a time.

None of these crash: the output just drifts. A fault is switched on only by passing it explicitly to one engine
(`LLMEngine(..., fault=Fault.EARLY_INCREMENT)`, paged layout only) or to one `Playground`; it lives in that object
and nowhere else, so it cannot leak into another engine, test or browser session, and nothing is on by default.
Validation is bypassed while a fault is active, so the symptom can be watched; `caught_by` names the check that
would have stopped it.

Each fault is acted out once, by a `FaultHook` (`fault_hook(fault, block_size, num_slots)`), at the link of the
chain it breaks: the write slots, the padding rows, the read tables, context_lens, positions, or the order of the
decode step's write and read. The engine's runner and the random-tensor bug lab (`lessons.buglab_tensors`) both call
the same hook, so they break the chain in the very same way. The hook without a fault is the identity (and checks
the block tables), so the runner's main path has no fault branches.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

import torch

from .addressing import PAD_SLOT, batch_slot_mapping, check_block_tables, pad_block_tables
from .kv_cache import write_kv

if TYPE_CHECKING:
    from .engine.runner import BatchInput


class Fault(str, enum.Enum):
    EARLY_INCREMENT = "early_increment"
    LATE_INCREMENT = "late_increment"
    SLOT_OFF_BY_ONE = "slot_off_by_one"
    BLOCK_SIZE_MISMATCH = "block_size_mismatch"
    USE_AFTER_FREE = "use_after_free"
    POSITION_OFF_BY_ONE = "position_off_by_one"
    PAD_NOT_SKIPPED = "pad_not_skipped"
    ALIASED_BLOCKS = "aliased_blocks"


@dataclass(frozen=True)
class FaultInfo:
    title: str
    what: str  # the bug, in one sentence
    where: str  # which link of the chain it breaks
    symptom: str  # what a learner sees
    caught_by: str  # which test / check catches it


FAULTS: dict[Fault, FaultInfo] = {
    Fault.EARLY_INCREMENT: FaultInfo(
        "cached_token_count incremented before the K/V write",
        "The newest token is counted as cached before its K/V are written, so attention reads its slot while it "
        "still holds stale data.",
        "write slot ↔ context_len (the state rule)",
        "Every decode step attends to garbage (zeros or a freed sequence's leftovers) in place of the newest key.",
        "tests/paged/test_attention.py::test_early_increment_reads_unwritten_slot_and_is_caught and the paged == "
        "contiguous engine parity"),
    Fault.LATE_INCREMENT: FaultInfo(
        "cached_token_count incremented late",
        "The newest token's K/V are written, but context_len still counts only the older tokens.",
        "context_len",
        "Each decode step ignores the token it is processing: the model loses its most recent input.",
        "paged == contiguous engine parity (tests/paged/test_engine.py)"),
    Fault.SLOT_OFF_BY_ONE: FaultInfo(
        "slot_mapping off by one",
        "Every token's K/V are written one slot past the slot its address says.",
        "block_offset → slot (write side)",
        "Reads return the previous token's K/V; the write after a block's last slot spills into the next "
        "physical block, which may belong to another sequence.",
        "tests/paged/test_kv_cache.py::test_write_kv_lands_where_locate_reads and engine parity"),
    Fault.BLOCK_SIZE_MISMATCH: FaultInfo(
        "writer and reader disagree on block_size",
        "The writer computes slots with half the block size the reader uses.",
        "logical_block_id / block_offset (write side)",
        "Tokens land at the wrong offsets and in the wrong blocks; history reads back scrambled.",
        "tests/paged/test_addressing.py::test_slot_mapping_equals_locate and engine parity"),
    Fault.USE_AFTER_FREE: FaultInfo(
        "use after free: a stale block table",
        "The runner keeps each batch row's old block table when a different sequence takes the row, so after a "
        "sequence finishes, its successor reads through the freed blocks of the finished one.",
        "block_table (read side)",
        "Right after any sequence finishes, the others read a dead sequence's (or a new owner's) K/V.",
        "validate_block_table + engine parity; the block manager's ownership view shows the mismatch"),
    Fault.POSITION_OFF_BY_ONE: FaultInfo(
        "decode position off by one",
        "Decode feeds the newest token at position num_tokens instead of num_tokens - 1.",
        "positions (RoPE)",
        "The cache is addressed correctly but the rotary embedding sees the wrong position: subtle drift.",
        "tests/paged/test_engine.py::test_state_rule_and_decode_positions and engine parity"),
    Fault.PAD_NOT_SKIPPED: FaultInfo(
        "padding slot −1 not skipped",
        "Batches are padded (as CUDA graphs do) with slot −1, and the write does not skip it: −1 wraps around to "
        "the pool's very last slot.",
        "slot_mapping (padding)",
        "Whoever owns the pool's last physical block finds a foreign key in its last slot.",
        "tests/paged/test_kv_cache.py::test_write_kv_skips_padding_slots"),
    Fault.ALIASED_BLOCKS: FaultInfo(
        "two logical blocks aliased to one physical block",
        "Logical block 1 is mapped to the same physical block as logical block 0.",
        "block_table",
        "Tokens of the two logical blocks overwrite each other; the first block's history reads back the second's.",
        "validate_block_table ('appears twice') in tests/paged/test_addressing.py"),
}


def as_fault(value: Fault | str | None) -> Fault | None:
    """Parse a fault name (or None); raises ValueError listing the valid names."""
    if value is None or isinstance(value, Fault):
        return value
    try:
        return Fault(value)
    except ValueError:
        raise ValueError(f"unknown fault {value!r}; choose one of {[f.value for f in Fault]}") from None


def writer_block_size(block_size: int) -> int:
    """The block size the buggy writer believes in (BLOCK_SIZE_MISMATCH)."""
    return block_size // 2 if block_size >= 2 else 2


NUM_PAD_ROWS = 3  # PAD_NOT_SKIPPED: padded rows appended to every write


def aliased_tables(tables: list[list[int]]) -> list[list[int]]:
    """ALIASED_BLOCKS: each table with logical block 1 mapped to logical block 0's physical block (copies)."""
    return [[t[0], t[0], *t[2:]] if len(t) >= 2 else list(t) for t in tables]


class FaultHook:
    """No fault: every link of the chain is the identity, and `apply` checks the block tables.

    A subclass per fault overrides the one link its bug breaks. Links take a step's per-sequence block tables
    (lists of ints), and per fed token its batch row `rows` [N] and token index `token_index` [N] (int64, CPU).
    """

    fault: Fault | None = None
    read_first = False  # decode reads history before the step's K/V are written (EARLY_INCREMENT)

    def __init__(self, block_size: int, num_slots: int) -> None:
        self.block_size, self.num_slots = block_size, num_slots
        self.rows: list[list[int]] = []  # the per-row table cache a stale reader keeps (USE_AFTER_FREE only)

    # --- the links ----------------------------------------------------------------------------------------------
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

    # --- what the two callers (runner, FaultyPlayground) call ---------------------------------------------------
    def apply(self, batch: BatchInput, tables: list[list[int]], num_blocks: int) -> BatchInput:
        """The step's inputs as this runner builds them; here (no fault) unchanged, after checking every table
        against the pool (ValueError naming the broken rule)."""
        check_block_tables(batch.block_tables, batch.context_lens, num_blocks, self.block_size, tables)
        return batch

    def write(self, key_cache: torch.Tensor, value_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              slots: torch.Tensor) -> None:
        """Write one step's K/V [N, num_kv_heads, head_dim] at `slots` [N] into one layer's caches (unchecked, as
        on the engine's hot path; a fault must show)."""
        write_kv(key_cache, value_cache, k, v, slots, validate=False)

    def decode(self, write: Callable[[], None], read: Callable[[], torch.Tensor]) -> torch.Tensor:
        """One decode step's write and read, in this hook's order; returns read()'s output."""
        if self.read_first:
            out = read()
            write()
            return out
        write()
        return read()


class _Faulty(FaultHook):
    """A hook with a fault: `apply` rebuilds the inputs through every link and checks nothing."""

    def apply(self, batch: BatchInput, tables: list[list[int]], num_blocks: int) -> BatchInput:
        """The step's inputs with this fault: slots, block tables, context_lens and positions through the links."""
        decode, device = not batch.is_prefill, batch.slot_mapping.device
        rows = torch.repeat_interleave(torch.arange(len(tables)), torch.tensor(batch.query_lens))
        token_index = batch.positions.cpu()
        slots = self.write_slots(batch.slot_mapping.cpu(), tables, rows, token_index)
        return replace(batch, slot_mapping=slots.to(device),
                       block_tables=pad_block_tables(self.read_tables(tables, decode)).to(device),
                       context_lens=self.context_lens(batch.context_lens, decode),
                       positions=self.positions(batch.positions, decode))


class EarlyIncrement(_Faulty):
    """Decode reads before it writes: the newest token's slot still holds stale K/V when it is read."""

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
        """The chain with writer_block_size; a logical block past the table's end takes its last entry."""
        wbs = writer_block_size(self.block_size)
        last = torch.tensor([len(t) - 1 for t in tables], dtype=torch.long)[rows]
        physical = pad_block_tables(tables, dtype=torch.long)[rows, torch.minimum(token_index // wbs, last)]
        return physical * wbs + token_index % wbs


class UseAfterFree(_Faulty):
    """Decode reads through a per-row table cache refreshed only when the row's table grows."""

    fault = Fault.USE_AFTER_FREE

    def read_tables(self, tables: list[list[int]], decode: bool) -> list[list[int]]:
        """At decode, row i's table is refreshed only when sequence i's table outgrows it: the bug."""
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
    """Every write carries NUM_PAD_ROWS padding rows of slot -1, which wrap to the pool's last slot."""

    fault = Fault.PAD_NOT_SKIPPED

    def pad_slots(self) -> torch.Tensor:
        """NUM_PAD_ROWS rows of slot -1, which wrap around to the pool's last slot."""
        return torch.full((NUM_PAD_ROWS,), PAD_SLOT, dtype=torch.long) % self.num_slots

    def write(self, key_cache: torch.Tensor, value_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              slots: torch.Tensor) -> None:
        """The real rows, then the padding rows, copies of row 0, at pad_slots() (a separate call, so the
        collision is deterministic: the padding wins, as it may on a GPU)."""
        super().write(key_cache, value_cache, k, v, slots)
        pad, n = self.pad_slots().to(k.device), NUM_PAD_ROWS
        write_kv(key_cache, value_cache, k[:1].expand(n, *k.shape[1:]).contiguous(),
                 v[:1].expand(n, *v.shape[1:]).contiguous(), pad, validate=False)


class AliasedBlocks(_Faulty):
    """Writer and reader both map logical block 1 to logical block 0's physical block."""

    fault = Fault.ALIASED_BLOCKS

    def write_slots(self, slots: torch.Tensor, tables: list[list[int]], rows: torch.Tensor,
                    token_index: torch.Tensor) -> torch.Tensor:
        return batch_slot_mapping(pad_block_tables(aliased_tables(tables)), rows, token_index, self.block_size)

    def read_tables(self, tables: list[list[int]], decode: bool) -> list[list[int]]:
        return aliased_tables(tables)


HOOKS: dict[Fault | None, type[FaultHook]] = {h.fault: h for h in (
    FaultHook, EarlyIncrement, LateIncrement, SlotOffByOne, BlockSizeMismatch, UseAfterFree, PositionOffByOne,
    PadNotSkipped, AliasedBlocks)}


def fault_hook(fault: Fault | str | None, block_size: int, num_slots: int) -> FaultHook:
    """The hook acting out `fault` (None: the identity) for a pool of num_slots slots in blocks of block_size.
    Raises ValueError for an unknown fault name."""
    return HOOKS[as_fault(fault)](block_size, num_slots)
