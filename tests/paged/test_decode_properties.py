"""Property: attention() and paged_attention_decode (every impl; triton under its CPU interpreter) give the correct
result or raise ValueError, for any input: valid shapes, tables and lengths with at most one spoiled (a size of 0, a
query dtype, a bad scale, a float or bool length, an out-of-pool or repeated block, one length too few), checked
both ways against a float64 reference that restates every rule (see test_boundary_properties.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boundary_util import (FAST, INT64_MAX, anything, bad_scale, close, entries_of, is_int, scale_is_valid, small,
                           spoil, table_is_valid)
from helpers import naive_decode
from paged.attention import attention, paged_attention_decode
from paged.kernels import triton_available

pytestmark = pytest.mark.article

REPO = Path(__file__).resolve().parents[2]


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
    code = (f"import sys; sys.path[:0] = [{str(REPO)!r}, {str(REPO / 'tests')!r}, {str(REPO / 'tests' / 'paged')!r}]\n"
            "import torch; torch.set_num_threads(1)\n"
            "from test_decode_properties import decode_property\n"
            "decode_property('triton', 15)(); print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TRITON_INTERPRET": "1"}, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-3000:] + proc.stderr[-3000:]
