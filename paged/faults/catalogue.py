"""The catalogue of classic silent bugs of a paged KV cache: names (`Fault`) and facts (`FAULTS`).

Each entry says what the bug is, where it breaks the address chain, what a learner sees and which
check catches it. How each is acted out lives in `paged.faults.hooks`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Fault(str, enum.Enum):
    EARLY_INCREMENT = "early_increment"
    LATE_INCREMENT = "late_increment"
    SLOT_OFF_BY_ONE = "slot_off_by_one"
    BLOCK_SIZE_MISMATCH = "block_size_mismatch"
    USE_AFTER_FREE = "use_after_free"
    POSITION_OFF_BY_ONE = "position_off_by_one"
    PAD_NOT_SKIPPED = "pad_not_skipped"
    ALIASED_BLOCKS = "aliased_blocks"
    STALE_SLOT_MAPPING = "stale_slot_mapping"


@dataclass(frozen=True)
class FaultInfo:
    title: str
    what: str  # the bug, in one sentence
    where: str  # which link of the chain it breaks
    symptom: str  # what a learner sees
    caught_by: str  # which test / check catches it
    # the module of the engine's chain (page 4) that hands on the broken value:
    # model_runner / paged_attention
    stage: str
    link: str  # the broken value's name there (slot_mapping, context_lens, block_tables, ...)


FAULTS: dict[Fault, FaultInfo] = {
    Fault.EARLY_INCREMENT: FaultInfo(
        "cached_token_count incremented before the K/V write",
        "The newest token is counted as cached before its K/V are written, so attention reads its "
        "slot while it still holds stale data.",
        "write slot ↔ context_len (the state rule)",
        "Every decode step attends to garbage (zeros or a freed sequence's leftovers) in place "
        "of the newest key.",
        "tests/paged/test_attention.py::test_early_increment_reads_unwritten_slot_and_is_caught "
        "and the paged == contiguous engine parity",
        "paged_attention", "read_before_write"),
    Fault.LATE_INCREMENT: FaultInfo(
        "cached_token_count incremented late",
        "The newest token's K/V are written, but context_len still counts only the older tokens.",
        "context_len",
        "Each decode step ignores the token it is processing: the model loses its most recent "
        "input.",
        "paged == contiguous engine parity (tests/paged/engine/test_engine.py)",
        "model_runner", "context_lens"),
    Fault.SLOT_OFF_BY_ONE: FaultInfo(
        "slot_mapping off by one",
        "Every token's K/V are written one slot past the slot its address says.",
        "block_offset → slot (write side)",
        "Reads return the previous token's K/V; the write after a block's last slot spills into "
        "the next physical block, which may belong to another sequence.",
        "tests/paged/test_kv_cache.py::test_write_kv_lands_where_locate_reads and engine parity",
        "model_runner", "slot_mapping"),
    Fault.BLOCK_SIZE_MISMATCH: FaultInfo(
        "writer and reader disagree on block_size",
        "The writer computes slots with half the block size the reader uses.",
        "logical_block_id / block_offset (write side)",
        "Tokens land at the wrong offsets and in the wrong blocks; history reads back scrambled.",
        "tests/paged/test_addressing.py::test_slot_mapping_equals_locate and engine parity",
        "model_runner", "slot_mapping"),
    Fault.USE_AFTER_FREE: FaultInfo(
        "use after free: a stale block table",
        "The runner keeps each batch row's old block table when a different sequence takes the "
        "row, so after a sequence finishes, its successor reads through the freed blocks of the "
        "finished one.",
        "block_table (read side)",
        "Right after any sequence finishes, the others read a dead sequence's (or a new owner's) "
        "K/V.",
        "validate_block_table + engine parity; the block manager's ownership view shows the "
        "mismatch",
        "model_runner", "block_tables"),
    Fault.POSITION_OFF_BY_ONE: FaultInfo(
        "decode position off by one",
        "Decode feeds the newest token at position num_tokens instead of num_tokens - 1.",
        "positions (RoPE)",
        "The cache is addressed correctly but the rotary embedding sees the wrong position: "
        "subtle drift.",
        "tests/paged/engine/test_engine.py::test_state_rule_and_decode_positions and engine parity",
        "model_runner", "positions"),
    Fault.PAD_NOT_SKIPPED: FaultInfo(
        "padding slot −1 not skipped",
        "Batches are padded (as CUDA graphs do) with slot −1, and the write does not skip it: "
        "−1 wraps around to the pool's very last slot.",
        "slot_mapping (padding)",
        "Whoever owns the pool's last physical block finds a foreign key in its last slot.",
        "tests/paged/test_kv_cache.py::test_write_kv_skips_padding_slots",
        "paged_attention", "pad_written"),
    Fault.ALIASED_BLOCKS: FaultInfo(
        "two logical blocks aliased to one physical block",
        "Logical block 1 is mapped to the same physical block as logical block 0.",
        "block_table",
        "Tokens of the two logical blocks overwrite each other; the first block's history reads "
        "back the second's.",
        "validate_block_table ('appears twice') in tests/paged/test_addressing.py",
        "model_runner", "block_tables"),
    Fault.STALE_SLOT_MAPPING: FaultInfo(
        "a stale slot_mapping replayed",
        "The buffer the write reads its slots from is refreshed only when the number of tokens "
        "changes, as a replayed CUDA graph's static input must be refreshed by hand: a decode "
        "step of the same batch size writes at the previous step's slots.",
        "slot_mapping (write side, across steps)",
        "From a batch's second decode step on, each new token's K/V overwrite the previous "
        "token's, and the newest slot keeps stale data: every step the history loses a token.",
        "paged == contiguous engine parity (tests/paged/engine/test_engine.py)",
        "model_runner", "slot_mapping"),
}


def as_fault(value: Fault | str | None) -> Fault | None:
    """Parse a fault name (or None) into a `Fault`.

    Raises: ValueError if the name is not a fault (the message lists the valid names).
    """
    if value is None or isinstance(value, Fault):
        return value
    try:
        return Fault(value)
    except ValueError:
        raise ValueError(f"unknown fault {value!r}; "
                         f"choose one of {[f.value for f in Fault]}") from None
