"""Shared by the boundary property tests: strategies that mix valid values with bad ones, and the reference's
reading of an input (is it an integer? a table of integers? valid by validate_block_table's rules?)."""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from paged.addressing import MAX_CONTEXT_LEN

INT64_MAX = 2**63 - 1
HUGE = [2**31, 2**62, 2**64, -(2**40)]
FAST = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

small = st.integers(-2, 9)
anything = st.one_of(small, small, small, st.sampled_from(HUGE), st.floats(-2, 9), st.booleans(), st.none(),
                     st.just(np.int64(2)), st.just("3"))
bad_scale = st.sampled_from([None, None, 0.5, 2, 0.0, -1.0, float("nan"), float("inf"), True, "1"])


def is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def ints(*values) -> tuple[int, ...] | None:
    """The values as Python ints (numpy ints overflow on huge operands), or None unless every one is an integer."""
    return tuple(int(x) for x in values) if all(is_int(x) for x in values) else None


def spoil(draw, values: dict, bad: dict) -> dict:
    """Replace at most one of `values` by a draw from its strategy in `bad` (none about one time in three)."""
    name = draw(st.sampled_from([None] * max(1, len(bad) // 2) + list(bad)))
    if name is not None:
        values[name] = draw(bad[name])
    return values


def maybe_tensor(draw, table: list):
    """The table as drawn, or (sometimes) as an int64 tensor."""
    return torch.tensor(table, dtype=torch.int64) if draw(st.integers(0, 3)) == 0 else table


@st.composite
def tables(draw, entries=st.one_of(small, small, small, anything)):
    """A block table: a list of anything (mostly small ints), sometimes as an integer or float tensor."""
    table = draw(st.lists(entries, max_size=6))
    kind = draw(st.sampled_from(["list", "list", "int_tensor", "float_tensor"]))
    if kind != "list" and all(is_int(x) and abs(x) < 2**62 for x in table):
        return torch.tensor([int(x) for x in table], dtype=torch.int64 if kind == "int_tensor" else torch.float32)
    return table


def entries_of(table) -> list[int] | None:
    """The reference's reading of a table: its entries as ints, or None when it is not a table of integers."""
    if isinstance(table, torch.Tensor):
        return None if table.is_floating_point() else [int(x) for x in table.tolist()]
    return [int(x) for x in table] if all(is_int(x) for x in table) else None


def agrees(call, expected, view=lambda got: got) -> None:
    """`call()` returns `expected` (seen through `view`), or raises ValueError when expected is None."""
    try:
        got = call()
    except ValueError:
        assert expected is None, "a valid input was refused"
        return
    assert expected is not None, f"an invalid input was accepted: {got!r}"
    assert view(got) == expected



def table_is_valid(entries, num_blocks, block_size, context_len, distinct=True) -> bool:
    """validate_block_table's rules, restated."""
    if entries is None or ints(num_blocks, block_size, context_len) is None:
        return False
    num_blocks, block_size, context_len = ints(num_blocks, block_size, context_len)
    if num_blocks < 1 or block_size < 1 or not 1 <= context_len <= MAX_CONTEXT_LEN \
            or -(-context_len // block_size) > len(entries):
        return False
    used = entries[: -(-context_len // block_size)]
    return all(0 <= p < num_blocks for p in used) and (not distinct or len(set(used)) == len(used))


def close(out: torch.Tensor, ref: torch.Tensor) -> bool:
    tol = 1e-5 * max(1.0, ref.abs().max().item()) if ref.numel() else 0
    return out.shape == ref.shape and (ref.numel() == 0 or bool((out.double() - ref).abs().max() <= tol))


def scale_is_valid(scale) -> bool:
    return scale is None or (isinstance(scale, (int, float)) and not isinstance(scale, bool)
                             and math.isfinite(scale) and scale > 0)
