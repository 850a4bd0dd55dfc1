"""Type and range checks for values that cross the library's boundary (configs, requests, block ids).

Python quietly turns `True` into 1 and `int(1.9)` into 1, so a float or a bool given where an integer is meant would
otherwise become a different, valid-looking number. These helpers refuse such values with a ValueError that names
the value and the rule, and return the plain Python number to store.
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any, Iterable

import torch


def _is_bool(value: Any) -> bool:
    """A Python, numpy or torch bool (all of which would otherwise pass as the integers 0 and 1)."""
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def as_int(value: Any, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as a Python int in [lo, hi] (either bound optional): the library's one integer check.

    Accepts ints and integer scalars of numpy / torch (0-d, anything with `__index__`), never bools, floats (`1.0`
    included: an integer is meant, so a float is a mistake upstream), strings or arrays (a one-element tensor too).
    Raises ValueError naming `name` and the rule: "<name> must be an integer >= <lo>, got <value>" and the like.
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
            raise ValueError(f"{name} must be an integer, got {value!r} ({type(value).__name__})") from None
    if lo is not None and number < lo or hi is not None and number > hi:
        rule = (f">= {lo}" if hi is None else f"<= {hi}" if lo is None else f"in [{lo}, {hi}]")
        raise ValueError(f"{name} must be an integer {rule}, got {number}")
    return number


def as_float(value: Any, name: str, lo: float | None = None, hi: float | None = None,
             lo_open: bool = False) -> float:
    """`value` as a finite Python float in [lo, hi] (`lo_open`: (lo, hi]). Ints are fine; bools, NaN, ±inf,
    strings and anything else are refused with a ValueError naming `name` and the rule."""
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
    """`value` if it is a bool (numpy's bool too); anything else (0, 1, "yes") raises ValueError."""
    if _is_bool(value) and getattr(value, "ndim", 0) == 0:
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


def as_int_list(block_table: Any, name: str = "block_table") -> list[int]:
    """The entries of a block table (a sequence of ints, or an integer tensor, flattened) as Python ints; raises
    ValueError for anything else (floats would silently truncate: [1.9] is not block 1). A list of plain ints is
    returned as it is (callers only read it)."""
    if type(block_table) is list and all(type(x) is int for x in block_table):
        return block_table
    if isinstance(block_table, torch.Tensor):
        if block_table.dtype == torch.bool or block_table.is_floating_point() or block_table.is_complex():
            raise ValueError(f"{name} must hold integers, got a {block_table.dtype} tensor")
        return [int(x) for x in block_table.reshape(-1).tolist()]
    if isinstance(block_table, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of integers, got {block_table!r}")
    try:
        items = list(block_table)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of integers, got {block_table!r}") from None
    return [as_int(x, f"{name}[{i}]") for i, x in enumerate(items)]


def as_token_ids(token_ids: Iterable[Any], name: str = "token ids", vocab_size: int | None = None) -> list[int]:
    """A list of token ids as Python ints, each >= 0 (and < vocab_size when given).

    Accepts a list or tuple (or a 1-D numpy array / torch tensor) of integers; a str, a bool or a float anywhere,
    a nested list or an id out of range raises ValueError naming the first bad entry.
    """
    if isinstance(token_ids, (str, bytes)):
        raise ValueError(f"{name} must be a list of integers, got the string {token_ids!r} (encode text first)")
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


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}  # by name (URL, CLI)


def dtype_of(name: str) -> torch.dtype:
    """torch dtype for "float32" / "float16" / "bfloat16" (ValueError otherwise)."""
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return DTYPES[name]
