"""Type and range checks for values crossing the library's boundary (configs, requests, block ids).

Python turns `True` into 1 and `int(1.9)` into 1, so a bool or a float given for an integer would
become a valid-looking wrong number. These helpers refuse such values with a ValueError naming the
value and the rule, and return the plain Python number to store. The address chain's own checks
are in address_checks.py, the attention and K/V-write entry points' in attention_checks.py.
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
