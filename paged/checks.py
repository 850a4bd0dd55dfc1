"""Type and range checks for values crossing the library's boundary (configs, requests, block ids).

Python turns `True` into 1 and `int(1.9)` into 1, so a bool or a float given for an integer would
become a valid-looking wrong number. These helpers refuse such values with a ValueError naming the
value and the rule, and return the plain Python number to store.
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any, Iterable

import torch


def _is_bool(value: Any) -> bool:
    """A Python, numpy or torch bool (each would otherwise pass as the integers 0 and 1)."""
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def int_text(text: str, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """A user's string of ASCII digits (optional sign and spaces) as an int in [lo, hi].

    int() also reads other scripts' digits ("٣" is 3) and fails on "²" naming no setting.
    Raises: ValueError if it is not ASCII digits, or as `as_int`.
    """
    body = text.strip() if isinstance(text, str) else None
    digits = body[1:] if body and body[0] in "+-" else body
    if not digits or not digits.isascii() or not digits.isdigit() or len(digits) > 18:
        raise ValueError(f"{name} must be an integer written in ASCII digits (0-9), got {text!r}")
    return as_int(int(body), name, lo, hi)


def as_int(value: Any, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as a Python int in [lo, hi] (either bound optional): the library's one integer check.

    Takes ints and 0-d integer scalars of numpy / torch (`__index__`); never bools, floats (`1.0`
    too: a float is a mistake upstream), strings or arrays (a one-element tensor too).
    Raises: ValueError naming `name` and the rule ("<name> must be an integer >= <lo>, got ...").
    """
    if type(value) is int:  # a plain int (not a bool: type() is exact) needs no conversion
        number = value
    elif _is_bool(value):
        raise ValueError(f"{name} must be an integer, got the bool {value!r}")
    elif getattr(value, "ndim", 0) != 0:
        raise ValueError(f"{name} must be one integer, got an array of shape {tuple(value.shape)}")
    else:
        try:
            number = operator.index(value)
        except (TypeError, RuntimeError, ValueError):  # torch raises RuntimeError for some tensors
            raise ValueError(f"{name} must be an integer, got {value!r} "
                             f"({type(value).__name__})") from None
    if lo is not None and number < lo or hi is not None and number > hi:
        rule = (f">= {lo}" if hi is None else f"<= {hi}" if lo is None else f"in [{lo}, {hi}]")
        raise ValueError(f"{name} must be an integer {rule}, got {number}")
    return number


def as_float(value: Any, name: str, lo: float | None = None, hi: float | None = None,
             lo_open: bool = False) -> float:
    """`value` as a finite Python float in [lo, hi] (`lo_open`: (lo, hi]); ints are fine.
    Raises: ValueError naming `name` for a bool, NaN, ±inf, a string or a value out of range."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    try:
        number = float(value)
    except OverflowError:  # an int past float's range, e.g. 10**400
        raise ValueError(f"{name} must be a finite number, got one too large for a float") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {number!r}")
    below = lo is not None and (number <= lo if lo_open else number < lo)
    if below or hi is not None and number > hi:
        left = "(" if lo_open else "["
        raise ValueError(f"{name} must be in {left}{lo if lo is not None else '-inf'}, "
                         f"{hi if hi is not None else 'inf'}], got {number!r}")
    return number


def as_bool(value: Any, name: str) -> bool:
    """`value` if it is a bool (numpy's bool too).
    Raises: ValueError for anything else (0, 1, "yes")."""
    if _is_bool(value) and getattr(value, "ndim", 0) == 0:
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


def as_int_list(block_table: Any, name: str = "block_table") -> list[int]:
    """A block table (a sequence of ints, or an integer tensor, flattened) as Python ints; a list of
    plain ints is returned as it is (callers only read it).
    Raises: ValueError for anything else (floats would truncate: [1.9] is not block 1)."""
    if type(block_table) is list and all(type(x) is int for x in block_table):
        return block_table
    if isinstance(block_table, torch.Tensor):
        if (block_table.dtype == torch.bool or block_table.is_floating_point()
                or block_table.is_complex()):
            raise ValueError(f"{name} must hold integers, got a {block_table.dtype} tensor")
        return [int(x) for x in block_table.reshape(-1).tolist()]
    if isinstance(block_table, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of integers, got {block_table!r}")
    try:
        items = list(block_table)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of integers, got {block_table!r}") from None
    return [as_int(x, f"{name}[{i}]") for i, x in enumerate(items)]


def as_token_ids(token_ids: Iterable[Any], name: str = "token ids",
                 vocab_size: int | None = None) -> list[int]:
    """Token ids (a list, tuple, 1-D numpy array or tensor) as Python ints >= 0 (< vocab_size).
    Raises: ValueError naming the first bad entry: a str, bool or float, a nested list, a bad id."""
    if isinstance(token_ids, (str, bytes)):
        raise ValueError(f"{name} must be a list of integers, got the string {token_ids!r} "
                         "(encode text first)")
    if hasattr(token_ids, "tolist") and getattr(token_ids, "ndim", 1) == 1:
        token_ids = token_ids.tolist()
    if not isinstance(token_ids, (list, tuple)):
        raise ValueError(f"{name} must be a list of integers, got {type(token_ids).__name__}")
    hi = None if vocab_size is None else vocab_size - 1
    rule = "" if vocab_size is None else f" (vocab_size {vocab_size})"
    out = []
    for i, t in enumerate(token_ids):
        try:
            out.append(as_int(t, f"{name}[{i}]", 0, hi))
        except ValueError as err:
            raise ValueError(f"{err}{rule}") from None
    return out


def check_sequence(seq_id: Any, prompt_token_ids: Any,
                   request_id: Any) -> tuple[int, list[int], int]:
    """Sequence's (seq_id, prompt_token_ids, request_id; None: seq_id) as ints.
    Raises: ValueError unless both ids are integers >= 0 and the prompt is a non-empty id list."""
    seq_id = as_int(seq_id, "seq_id", 0)
    prompt_token_ids = as_token_ids(prompt_token_ids, f"sequence {seq_id}: prompt_token_ids")
    if not prompt_token_ids:
        raise ValueError(f"sequence {seq_id}: prompt_token_ids must not be empty")
    request_id = seq_id if request_id is None else as_int(request_id, "request_id", 0)
    return seq_id, prompt_token_ids, request_id


def default_device() -> torch.device:
    """cuda when available, else cpu (what device=None means)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


DTYPES = {"float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}  # by name (URL, CLI)


def dtype_of(name: str) -> torch.dtype:
    """torch dtype for "float32" / "float16" / "bfloat16". Raises: ValueError for another name."""
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return DTYPES[name]


# --- the address chain's boundary (paged.addressing's entry points) -------------------------------
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


# --- the BlockManager's boundary: which sequences hold blocks -------------------------------------
def check_forkable(parent_id: int, child_id: int, tables: dict) -> None:
    """BlockManager.fork's boundary.
    Raises: ValueError unless the parent holds blocks and the child holds none."""
    if parent_id not in tables:
        raise ValueError(f"cannot fork sequence {parent_id}: it holds no blocks")
    if child_id in tables:
        raise ValueError(f"sequence {child_id} already holds blocks")


def check_allocated(seq, tables: dict, op: str) -> None:
    """BlockManager.<op>'s boundary (append_slot, ensure_capacity).
    Raises: ValueError unless seq holds blocks (allocate first)."""
    if not seq.block_table or seq.seq_id not in tables:
        first = "allocate (prefill)" if op == "append_slot" else "allocate"
        raise ValueError(f"sequence {seq.seq_id} holds no blocks: {first} before {op}")


def check_freeable(seq_id: int, tables: dict, freed: set) -> None:
    """BlockManager.free's boundary. Raises: ValueError on a double free or an unknown sequence."""
    if seq_id not in tables:
        if seq_id in freed:
            raise ValueError(f"double free: sequence {seq_id}'s blocks were already freed")
        raise ValueError(f"free of unknown sequence {seq_id}: this block manager never allocated "
                         "it")


def check_ref_counts(ref_counts: list[int], owners: list[tuple[int, ...]], free) -> None:
    """Assert the BlockManager's invariants: ref_counts[b] == len(owners[b]); b free iff unowned."""
    counts = [len(o) for o in owners]
    assert counts == ref_counts, "ref counts differ from the number of tables holding each block"
    assert all((b in free) == (counts[b] == 0) for b in range(len(counts))), \
        "free queue != blocks with ref 0"
