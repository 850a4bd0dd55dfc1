"""Property: the address chain and the KV cache (locate, slot_mapping, blocks_needed, validate_block_table,
KVCachePool, write_kv, gather_kv), given any input, return the correct result or raise ValueError. (attention and
paged_attention_decode: test_decode_properties.py.)

Each example starts from valid arguments and, about two times in three, spoils one of them with the kind of value
that used to slip through: a float or bool where an int is meant, a zero or negative size, a huge id, an id outside
the pool, a repeated slot. An independent reference (plain Python loops, float64 attention) decides
whether the input is valid and, if so, what the answer is; the code under test must agree both ways: a valid input
gives that answer, an invalid one raises ValueError, and no input raises anything else."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from boundary_util import (FAST, INT64_MAX, agrees, anything, entries_of, ints, is_int, maybe_tensor, spoil,
                           table_is_valid, tables)
from paged.addressing import MAX_CONTEXT_LEN, blocks_needed, locate, slot_mapping, validate_block_table
from paged.attention import gather_kv
from paged.kv_cache import KVCachePool, write_kv

pytestmark = pytest.mark.article


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
