"""Property: every public entry point, given any input, returns the correct result or raises ValueError.

Each example starts from valid arguments and, about two times in three, spoils one of them with the kind of value
that used to slip through: a float or bool where an int is meant, a zero or negative size, a huge id, an id outside
the pool, a repeated slot, a bad scale. An independent reference (plain Python loops, float64 attention) decides
whether the input is valid and, if so, what the answer is; the code under test must agree both ways: a valid input
gives that answer, an invalid one raises ValueError, and no input raises anything else."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import naive_decode
from paged.addressing import MAX_CONTEXT_LEN, blocks_needed, locate, slot_mapping, validate_block_table
from paged.attention import attention, gather_kv, paged_attention_decode
from paged.kernels import triton_available
from paged.kv_cache import KVCachePool, write_kv

REPO = Path(__file__).resolve().parents[1]
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


@st.composite
def locate_args(draw):
    block_size, table = draw(st.integers(1, 4)), draw(st.lists(st.integers(0, 7), min_size=1, max_size=5))
    values = dict(token=draw(st.integers(0, len(table) * block_size - 1)), table=maybe_tensor(draw, table),
                  block_size=block_size)
    return spoil(draw, values, dict(token=anything, table=tables(), block_size=anything))


@FAST
@given(args=locate_args())
def test_locate(args):
    token, table, block_size = args["token"], args["table"], args["block_size"]
    entries, expected, parts = entries_of(table), None, ints(token, block_size)
    if entries is not None and parts and parts[1] >= 1 and parts[0] >= 0:
        token, block_size = parts
        logical = token // block_size
        if logical < len(entries) and entries[logical] >= 0:
            expected = (logical, entries[logical], token % block_size, entries[logical] * block_size + token % block_size)
    agrees(lambda: locate(args["token"], table, args["block_size"]), expected,
           lambda a: (a.logical_block_id, a.physical_block_id, a.block_offset, a.slot))


@st.composite
def slot_mapping_args(draw):
    block_size, table = draw(st.integers(1, 4)), draw(st.lists(st.integers(0, 7), min_size=1, max_size=5))
    end = draw(st.integers(0, len(table) * block_size))
    values = dict(table=maybe_tensor(draw, table), start=draw(st.integers(0, end)), end=end, block_size=block_size)
    return spoil(draw, values, dict(table=tables(), start=anything, end=anything, block_size=anything))


@FAST
@given(args=slot_mapping_args())
def test_slot_mapping(args):
    table = args["table"]
    entries, expected, parts = entries_of(table), None, ints(args["start"], args["end"], args["block_size"])
    if entries is not None and parts and parts[2] >= 1 and 0 <= parts[0] <= parts[1] <= MAX_CONTEXT_LEN \
            and -(-parts[1] // parts[2]) <= len(entries):
        start, end, block_size = parts
        used = entries[start // block_size: -(-end // block_size)] if end > start else []
        if all(0 <= p and p * block_size + block_size - 1 <= INT64_MAX for p in used):
            expected = [entries[t // block_size] * block_size + t % block_size for t in range(start, end)]
    agrees(lambda: slot_mapping(table, args["start"], args["end"], args["block_size"]), expected,
           lambda slots: slots.tolist())


@FAST
@given(num_tokens=st.one_of(st.integers(0, 50), anything), block_size=st.one_of(st.integers(1, 8), anything))
def test_blocks_needed(num_tokens, block_size):
    parts = ints(num_tokens, block_size)
    ok = parts is not None and parts[0] >= 0 and parts[1] >= 1
    agrees(lambda: blocks_needed(num_tokens, block_size), -(-parts[0] // parts[1]) if ok else None)


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


@st.composite
def pool_table_args(draw, distinct=True):
    """A pool's num_blocks and block_size, a context_len it can hold, and a table for it (distinct blocks, or any
    blocks of the pool), then one argument maybe spoiled."""
    num_blocks, block_size = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    context_len = draw(st.integers(1, num_blocks * block_size))
    used = -(-context_len // block_size)
    if distinct:
        table = list(draw(st.permutations(range(num_blocks))))[:used]
    else:
        table = draw(st.lists(st.integers(0, num_blocks - 1), min_size=used, max_size=used))
    table = table + draw(st.lists(anything, max_size=2)) if draw(st.booleans()) else maybe_tensor(draw, table)
    values = dict(table=table, num_blocks=num_blocks, block_size=block_size, context_len=context_len)
    bad = dict(table=tables(), context_len=anything)  # gather_kv reads num_blocks and block_size off the pool
    return spoil(draw, values, bad | dict(num_blocks=anything, block_size=anything) if distinct else bad)


@FAST
@given(args=pool_table_args())
def test_validate_block_table(args):
    table, num_blocks, block_size, context_len = args.values()
    valid = table_is_valid(entries_of(table), num_blocks, block_size, context_len)
    agrees(lambda: validate_block_table(table, num_blocks, block_size, context_len) or "ok",
           "ok" if valid else None)


SIZE_NAMES = ("num_layers", "num_blocks", "block_size", "num_kv_heads", "head_dim")


@st.composite
def pool_args(draw):
    values = {name: draw(st.integers(1, 4)) for name in SIZE_NAMES}
    values |= dict(dtype=draw(st.sampled_from([torch.float32, torch.float16])), max_bytes=10**6)
    bad = {name: st.one_of(st.integers(-1, 0), anything) for name in SIZE_NAMES}
    bad |= dict(dtype=st.sampled_from([torch.int32, "float32", None]),
                max_bytes=st.sampled_from([1, 100, 2048, 0, 2.5, True]))
    return spoil(draw, values, bad)


@FAST
@given(args=pool_args())
def test_kv_cache_pool(args):
    sizes, dtype, max_bytes = [args[name] for name in SIZE_NAMES], args["dtype"], args["max_bytes"]
    valid = (ints(*sizes) is not None and min(ints(*sizes)) >= 1 and isinstance(dtype, torch.dtype)
             and dtype.is_floating_point and is_int(max_bytes) and max_bytes >= 1
             and 2 * math.prod(ints(*sizes)) * (4 if dtype == torch.float32 else 2) <= max_bytes)
    expected = (tuple(int(x) for x in sizes), True) if valid else None
    agrees(lambda: KVCachePool(*sizes, dtype=dtype, device="cpu", max_bytes=max_bytes), expected,
           lambda pool: (tuple(pool.key_cache.shape), bool(pool.key_cache.eq(0).all() and pool.value_cache.eq(0).all())))


@st.composite
def write_args(draw):
    num_blocks, block_size = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    num_slots = num_blocks * block_size
    slots = [s if draw(st.integers(0, 4)) else -1 for s in draw(st.permutations(range(num_slots)))]
    slots = slots[: draw(st.integers(0, num_slots))]
    values = dict(num_blocks=num_blocks, block_size=block_size, slots=slots, head_dim=3, key_dtype=torch.float32,
                  slot_dtype=torch.int64, rows=len(slots))
    bad = dict(slots=st.lists(st.integers(-2, num_slots + 1), min_size=len(slots), max_size=len(slots)),
               head_dim=st.just(2), key_dtype=st.just(torch.float64), slot_dtype=st.sampled_from([torch.float32,
                                                                                                  torch.int32]),
               rows=st.integers(0, num_slots + 1))
    return spoil(draw, values, bad)


@FAST
@given(args=write_args())
def test_write_kv(args):
    num_slots, slots = args["num_blocks"] * args["block_size"], args["slots"]
    gen = torch.Generator().manual_seed(num_slots)
    key_cache, value_cache = torch.randn(2, args["num_blocks"], args["block_size"], 2, 3, generator=gen)
    key = torch.randn(args["rows"], 2, args["head_dim"], generator=gen).to(args["key_dtype"])
    value = key * 2
    before_k, before_v = key_cache.clone().view(num_slots, 2, 3), value_cache.clone().view(num_slots, 2, 3)
    written = [s for s in slots if s >= 0]
    valid = (args["head_dim"] == 3 and args["key_dtype"] == torch.float32 and args["slot_dtype"] != torch.float32
             and len(slots) == args["rows"] and all(-1 <= s < num_slots for s in slots)
             and len(set(written)) == len(written))
    want_k, want_v = before_k.clone(), before_v.clone()
    for row, s in enumerate(slots):
        if valid and s >= 0:
            want_k[s], want_v[s] = key[row], value[row]
    agrees(lambda: write_kv(key_cache, value_cache, key, value, torch.tensor(slots, dtype=args["slot_dtype"])) or "ok",
           "ok" if valid else None)
    assert torch.equal(key_cache.view(num_slots, 2, 3), want_k)
    assert torch.equal(value_cache.view(num_slots, 2, 3), want_v)


@FAST
@given(args=pool_table_args(distinct=False))
def test_gather_kv(args):
    table, num_blocks, block_size, context_len = args.values()
    gen = torch.Generator().manual_seed(num_blocks)
    key_cache, value_cache = torch.randn(2, num_blocks, block_size, 2, 3, generator=gen)
    entries, expected = entries_of(table), None
    if table_is_valid(entries, num_blocks, block_size, context_len, distinct=False):
        rows = [(entries[t // block_size], t % block_size) for t in range(int(context_len))]
        expected = (torch.stack([key_cache[p, o] for p, o in rows]), torch.stack([value_cache[p, o] for p, o in rows]))
    try:
        keys, values = gather_kv(key_cache, value_cache, table, context_len)
    except ValueError:
        assert expected is None, "a valid input was refused"
        return
    assert expected is not None and torch.equal(keys, expected[0]) and torch.equal(values, expected[1])


def close(out: torch.Tensor, ref: torch.Tensor) -> bool:
    tol = 1e-5 * max(1.0, ref.abs().max().item()) if ref.numel() else 0
    return out.shape == ref.shape and (ref.numel() == 0 or bool((out.double() - ref).abs().max() <= tol))


def scale_is_valid(scale) -> bool:
    return scale is None or (isinstance(scale, (int, float)) and not isinstance(scale, bool)
                             and math.isfinite(scale) and scale > 0)


@st.composite
def attention_args(draw):
    num_kv_heads, context_len = draw(st.integers(1, 2)), draw(st.integers(1, 5))
    causal = draw(st.booleans())
    values = dict(q_len=draw(st.sampled_from([None, 0, 1, min(3, context_len)])), num_kv_heads=num_kv_heads,
                  num_heads=num_kv_heads * draw(st.integers(1, 2)), head_dim=draw(st.integers(1, 4)),
                  key_head_dim=None, context_len=context_len, scale=draw(st.sampled_from([None, 0.5, 2])),
                  causal=causal)
    bad = dict(q_len=st.just(context_len + 1), num_kv_heads=st.just(0), num_heads=st.sampled_from([0, 3]),
               head_dim=st.just(0), key_head_dim=st.just(5), context_len=st.just(0), scale=bad_scale)
    return spoil(draw, values, bad)


@FAST
@given(args=attention_args())
def test_attention(args):
    q_len, num_heads, head_dim, context_len = args["q_len"], args["num_heads"], args["head_dim"], args["context_len"]
    gen = torch.Generator().manual_seed(context_len)
    query = torch.randn((num_heads, head_dim) if q_len is None else (q_len, num_heads, head_dim), generator=gen)
    key_head_dim = head_dim if args["key_head_dim"] is None else args["key_head_dim"]
    keys = torch.randn(context_len, args["num_kv_heads"], key_head_dim, generator=gen)
    values, scale, causal, rows = -keys, args["scale"], args["causal"], 1 if q_len is None else q_len
    valid = (min(num_heads, args["num_kv_heads"], head_dim, context_len) >= 1 and key_head_dim == head_dim
             and num_heads % args["num_kv_heads"] == 0 and scale_is_valid(scale) and (not causal or rows <= context_len))
    try:
        out = attention(query, keys, values, scale=scale, causal=causal)
    except ValueError:
        assert not valid, "a valid input was refused"
        return
    assert valid, "an invalid input was accepted"
    q = query.reshape(rows, num_heads, head_dim)
    seen = [context_len - rows + i + 1 if causal else context_len for i in range(rows)]  # keys row i may see
    ref = torch.stack([naive_decode(q[i], keys[:seen[i]], values[:seen[i]], scale) for i in range(rows)]) if rows \
        else torch.zeros(0, num_heads, head_dim, dtype=torch.float64)
    assert close(out, ref.reshape(out.shape))


# ----------------------------------------------------------------------------------------------------------------
# paged_attention_decode, for each impl
# ----------------------------------------------------------------------------------------------------------------
@st.composite
def decode_cases(draw):
    """A small pool and a valid batch (distinct blocks per table, anything past each context), then maybe one
    argument spoiled: a size of 0, a query dtype, a scale, one length too few, one sequence's length or table."""
    num_blocks, block_size = draw(st.integers(1, 6)), draw(st.sampled_from([1, 2, 3, 4]))
    num_kv_heads = draw(st.integers(1, 2))
    tables, lens = [], []
    for _ in range(draw(st.integers(0, 3))):
        context_len = draw(st.integers(1, num_blocks * block_size))
        used = list(draw(st.permutations(range(num_blocks))))[: -(-context_len // block_size)]
        tables.append(used + draw(st.lists(st.one_of(small, anything), max_size=2)))
        lens.append(context_len)
    values = dict(num_blocks=num_blocks, block_size=block_size, num_kv_heads=num_kv_heads,
                  num_heads=num_kv_heads * draw(st.integers(1, 2)), head_dim=draw(st.sampled_from([1, 3, 4])),
                  tables=tables, lens=lens, as_tensor=draw(st.booleans()),
                  scale=draw(st.sampled_from([None, 0.5, 2])), query_dtype=torch.float32)
    b = draw(st.integers(0, max(0, len(tables) - 1)))
    bad = dict(num_kv_heads=st.just(0), num_heads=st.just(num_kv_heads * 2 + 1), head_dim=st.just(0),
               scale=bad_scale, query_dtype=st.just(torch.float64), lens=st.just(lens[:-1] or [1]))
    if tables:  # one sequence's length or table spoiled
        bad["lens"] = st.one_of(st.just(lens[:-1]), anything.map(lambda x: lens[:b] + [x] + lens[b + 1:]))
        bad["tables"] = tables_entries().map(lambda t: tables[:b] + [t] + tables[b + 1:])
    case = spoil(draw, values, bad)
    case["as_tensor"] = case["as_tensor"] and all(is_int(x) and abs(x) < 2**62 for t in case["tables"] for x in t)
    return case


def tables_entries():
    return st.lists(st.one_of(st.integers(-1, 7), anything), max_size=4)


def expected_decode(case, query, key_cache, value_cache, impl):
    """The float64 reference output, or None when the case is invalid (restating every rule independently)."""
    c = case
    if min(c["num_kv_heads"], c["num_heads"], c["head_dim"]) < 1 or c["num_heads"] % c["num_kv_heads"]:
        return None
    if c["query_dtype"] != torch.float32 or not scale_is_valid(c["scale"]) or len(c["lens"]) != len(c["tables"]):
        return None
    if impl == "triton" and c["block_size"] & (c["block_size"] - 1) and c["tables"]:
        return None  # the Triton kernel needs a power-of-two block_size (its one extra rule; B = 0 never runs it)
    out = []
    for table, context_len in zip(c["tables"], c["lens"]):
        entries = entries_of(table)
        if entries is None or not all(-2**63 <= x <= INT64_MAX for x in entries) \
                or not table_is_valid(entries, c["num_blocks"], c["block_size"], context_len):
            return None
        context_len = int(context_len)
        rows = [(entries[t // c["block_size"]], t % c["block_size"]) for t in range(context_len)]
        keys = torch.stack([key_cache[p, o] for p, o in rows])
        values = torch.stack([value_cache[p, o] for p, o in rows])
        out.append(naive_decode(query[len(out)], keys, values, c["scale"]))
    return torch.stack(out) if out else torch.zeros(0, c["num_heads"], c["head_dim"], dtype=torch.float64)


def check_decode(impl: str, case: dict) -> None:
    c = case
    gen = torch.Generator().manual_seed(c["num_blocks"])
    shape = (c["num_blocks"], c["block_size"], c["num_kv_heads"], c["head_dim"])
    key_cache, value_cache = torch.randn(2, *shape, generator=gen)
    query = torch.randn(len(c["tables"]), c["num_heads"], c["head_dim"], generator=gen).to(c["query_dtype"])
    tables = c["tables"]
    if c["as_tensor"] and tables:
        width = max(1, max(len(t) for t in tables))
        tables = torch.tensor([[int(x) for x in t] + [-1] * (width - len(t)) for t in tables], dtype=torch.int64)
    expected = expected_decode(c, query, key_cache, value_cache, impl)
    try:
        out = paged_attention_decode(query, key_cache, value_cache, tables, c["lens"], scale=c["scale"], impl=impl)
    except ValueError:
        assert expected is None, "a valid input was refused"
        return
    assert expected is not None, "an invalid input was accepted"
    assert out.dtype == query.dtype and close(out, expected)


def decode_property(impl: str, max_examples: int):
    """The decode property for one impl, as a runnable hypothesis test."""
    @settings(max_examples=max_examples, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=decode_cases())
    def prop(case):
        check_decode(impl, case)
    return prop


@pytest.mark.parametrize("impl, examples", [("loop", 100), ("gather", 100), ("fused", 100), ("native", 60)])
def test_paged_attention_decode(impl, examples):
    """Any batch gives every impl's correct answer or ValueError (native: fewer examples, it builds once)."""
    decode_property(impl, examples)()


@pytest.mark.slow
@pytest.mark.skipif(not triton_available(), reason="triton is not installed")
def test_paged_attention_decode_triton_interpreted():
    """The same property for impl='triton' under its CPU interpreter (a subprocess; few examples: ~1 ms per
    program and block)."""
    code = (f"import sys; sys.path[:0] = [{str(REPO)!r}, {str(REPO / 'tests')!r}]\n"
            "import torch; torch.set_num_threads(1)\n"
            "from test_boundary_properties import decode_property\n"
            "decode_property('triton', 15)(); print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TRITON_INTERPRET": "1"}, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-3000:] + proc.stderr[-3000:]
