"""Gather-then-attend equals attention over a contiguous KV cache holding the same data."""

import random

import pytest
import torch

from helpers import naive_decode, rel_err, scattered_tables
from paged.addressing import slot_mapping
from paged.attention import (attention, contiguous_attention_decode, gather_kv, gather_kv_loop,
                             paged_attention_decode)
from paged.kv_cache import KVCachePool, write_kv

pytestmark = pytest.mark.article


def build_case(num_heads, num_kv_heads, head_dim, block_size, lens, dtype=torch.float32, seed=0):
    """Random contiguous K/V per sequence, written through slot_mapping into shuffled blocks of a pool.

    Returns query [B, H, D], the pool layer, tables, and the contiguous K/V [B, max_ctx, KVH, D] built
    independently of the pool (padding rows are NaN: a reader that touches them fails loudly)."""
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    num_blocks = sum(-(-n // block_size) for n in lens) + 3
    pool = KVCachePool(1, num_blocks, block_size, num_kv_heads, head_dim, dtype=dtype, device="cpu")
    kc, vc = pool.layer(0)
    kc.normal_(generator=g), vc.normal_(generator=g)  # garbage in unused blocks must not matter
    tables = scattered_tables(rng, num_blocks, lens, block_size)
    max_ctx = max(lens)
    keys = torch.full((len(lens), max_ctx, num_kv_heads, head_dim), float("nan"), dtype=dtype)
    values = keys.clone()
    for b, n in enumerate(lens):
        k = torch.randn(n, num_kv_heads, head_dim, generator=g).to(dtype)
        v = torch.randn(n, num_kv_heads, head_dim, generator=g).to(dtype)
        keys[b, :n], values[b, :n] = k, v
        write_kv(kc, vc, k, v, slot_mapping(tables[b], 0, n, block_size))
    query = torch.randn(len(lens), num_heads, head_dim, generator=g).to(dtype)
    return query, kc, vc, tables, keys, values


HEADS = [(8, 8), (8, 2), (8, 1)]
HEAD_DIMS = [32, 64, 80, 128]
BLOCK_SIZES = [1, 4, 16, 32]


def ragged_lens(block_size):
    return [1, block_size, block_size + 1, 54, 97]


@pytest.mark.parametrize("impl", ["loop", "gather"])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("heads", HEADS, ids=lambda h: f"{h[0]}q{h[1]}kv")
def test_paged_equals_contiguous_fp32(impl, heads, head_dim, block_size):
    """fp32 paged decode (both impls) matches the contiguous reference to < 1e-5 relative error."""
    query, kc, vc, tables, keys, values = build_case(*heads, head_dim, block_size, ragged_lens(block_size))
    lens = ragged_lens(block_size)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl=impl)
    ref = contiguous_attention_decode(query, keys, values, lens)
    assert out.shape == query.shape and out.dtype == torch.float32
    assert rel_err(out, ref) < 1e-5


@pytest.mark.parametrize("impl", ["loop", "gather"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("heads", HEADS, ids=lambda h: f"{h[0]}q{h[1]}kv")
def test_paged_half_precision_vs_float64(impl, dtype, heads, head_dim, block_size):
    """fp16/bf16 paged decode is within 1e-2 relative error of a float64 reference on the same data."""
    lens = ragged_lens(block_size)
    query, kc, vc, tables, keys, values = build_case(*heads, head_dim, block_size, lens, dtype=dtype)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl=impl)
    assert out.dtype == dtype
    ref = contiguous_attention_decode(query.double(), keys.double(), values.double(), lens)
    assert rel_err(out, ref) < 1e-2


@pytest.mark.parametrize("heads", HEADS, ids=lambda h: f"{h[0]}q{h[1]}kv")
def test_reference_matches_naive_float64(heads):
    """The contiguous reference itself agrees with an explicit per-head float64 loop (GQA mapping included)."""
    lens = [1, 5, 33]
    query, _, _, _, keys, values = build_case(*heads, 16, 4, lens)
    ref = contiguous_attention_decode(query, keys, values, lens)
    for b, n in enumerate(lens):
        assert rel_err(ref[b], naive_decode(query[b], keys[b, :n], values[b, :n])) < 1e-6


def test_gather_loop_and_vectorised_identical():
    """gather_kv_loop and gather_kv return bit-identical logical K/V in token order."""
    query, kc, vc, tables, keys, values = build_case(8, 2, 32, 4, [54])
    for fn in (gather_kv_loop, gather_kv):
        k, v = fn(kc, vc, tables[0], 54)
        assert torch.equal(k, keys[0]) and torch.equal(v, values[0])


def test_prefill_causal_mask_aligned_to_end():
    """Prefill query i sees keys 0 … ctx-q_len+i: equals decoding each query row alone over its visible prefix."""
    g = torch.Generator().manual_seed(3)
    keys, values = torch.randn(10, 2, 16, generator=g), torch.randn(10, 2, 16, generator=g)
    q = torch.randn(4, 8, 16, generator=g)
    out = attention(q, keys, values, causal=True)
    for i in range(4):
        visible = 10 - 4 + i + 1
        assert rel_err(out[i], naive_decode(q[i], keys[:visible], values[:visible])) < 1e-6
    assert rel_err(attention(q, keys, values)[0], naive_decode(q[0], keys, values)) < 1e-6


def test_early_increment_reads_unwritten_slot_and_is_caught():
    """Reading context_len = cached + 1 before the newest token's K/V is written changes the output: the check
    against the contiguous twin can fail, and passes once the write happens."""
    query, kc, vc, tables, keys, values = build_case(4, 2, 16, 4, [7])
    table, block_size = tables[0], 4
    table = table + [t for t in range(kc.shape[0]) if t not in table][:1]  # room for token 7
    g = torch.Generator().manual_seed(9)
    k_new, v_new = torch.randn(1, 2, 16, generator=g), torch.randn(1, 2, 16, generator=g)
    twin_k = torch.cat([keys[0, :7], k_new])[None]
    twin_v = torch.cat([values[0, :7], v_new])[None]
    ref = contiguous_attention_decode(query, twin_k, twin_v, [8])
    early = paged_attention_decode(query, kc, vc, [table], [8])  # token 7 not written yet
    assert rel_err(early, ref) > 1e-3
    write_kv(kc, vc, k_new, v_new, slot_mapping(table, 7, 8, block_size))
    assert rel_err(paged_attention_decode(query, kc, vc, [table], [8]), ref) < 1e-5


def test_gather_reuses_buffers_between_calls():
    """impl='gather' gives the same answer when called repeatedly with different batch shapes (buffer reuse)."""
    a = build_case(8, 2, 32, 4, [54, 9, 1], seed=1)
    b = build_case(8, 2, 32, 4, [3], seed=2)
    first = paged_attention_decode(a[0], a[1], a[2], a[3], [54, 9, 1])
    paged_attention_decode(b[0], b[1], b[2], b[3], [3])
    again = paged_attention_decode(a[0], a[1], a[2], a[3], [54, 9, 1])
    assert torch.equal(first, again)


@pytest.mark.parametrize("case, msg", [
    ("head_dim", "head_dim differs"),
    ("heads", "multiple of num_kv_heads"),
    ("dtype", "dtype mismatch"),
    ("device", "device mismatch"),
    ("ctx0", "at least 1 token"),
    ("beyond", "needs 4 blocks"),
    ("range", "outside the pool"),
    ("pad_inside", "-1 inside the used part"),
    ("twice", "appears twice"),
    ("batch", "context_lens has 1 entries"),
    ("impl", "unknown impl"),
])
def test_bad_decode_input_raises(case, msg):
    """Each bad input raises a ValueError naming the value and the rule; the caches are not modified."""
    query, kc, vc, tables, keys, values = build_case(8, 2, 32, 4, [5, 9])
    lens, impl = [5, 9], "gather"
    before = kc.clone()
    if case == "head_dim":
        query = query[..., :16]
    elif case == "heads":
        query = query[:, :3]
    elif case == "dtype":
        query = query.double()
    elif case == "device":
        query = torch.empty(query.shape, device="meta")
    elif case == "ctx0":
        lens = [0, 9]
    elif case == "beyond":
        lens = [5, 13]
    elif case == "range":
        tables = [tables[0], [tables[1][0], 999, tables[1][2]]]
    elif case == "pad_inside":
        tables = [tables[0], [tables[1][0], -1, tables[1][2]]]
    elif case == "twice":
        tables = [tables[0], [tables[1][0], tables[1][0], tables[1][2]]]
    elif case == "batch":
        lens = [5]
    elif case == "impl":
        impl = "warp-speed"
    with pytest.raises(ValueError, match=msg):
        paged_attention_decode(query, kc, vc, tables, lens, impl=impl)
    assert torch.equal(kc, before)


@pytest.mark.parametrize("impl", ["gather", "fused"])
def test_reused_buffers_survive_inference_mode_switches(impl):
    """A call under torch.inference_mode (as the engine makes) does not break a later call outside it."""
    query, kc, vc, tables, keys, values = build_case(8, 2, 32, 4, [9, 5])
    with torch.inference_mode():
        inside = paged_attention_decode(query, kc, vc, tables, [9, 5], impl=impl)
    outside = paged_attention_decode(query, kc, vc, tables, [9, 5], impl=impl)
    assert torch.equal(inside, outside)


@pytest.mark.parametrize("case, msg", [
    ("zero_kv_heads", "num_kv_heads = 0"),
    ("zero_head_dim", "head_dim = 0"),
    ("float_lens", r"context_lens\[0\] must be an integer"),
    ("bool_lens", r"context_lens\[1\] must be an integer, got the bool"),
    ("float_tensor_lens", "context_lens must hold integers"),
    ("float_table", r"block_tables\[1\]\[0\] must be an integer"),
    ("float_table_tensor", "block_tables must hold integers"),
    ("int_query", "dtype mismatch"),
    ("not_a_tensor", "query must be a torch.Tensor"),
    ("impl_not_str", "impl must be a string"),
])
def test_decode_boundary_types_and_sizes(case, msg):
    """Zero sizes, floats or bools where ints are meant, and non-tensors raise ValueError (not ZeroDivisionError,
    not a silent truncation of 5.9 to 5)."""
    query, kc, vc, tables, _, _ = build_case(8, 2, 32, 4, [5, 9])
    lens, impl = [5, 9], "gather"
    if case == "zero_kv_heads":
        kc, vc = kc[:, :, :0], vc[:, :, :0]
    elif case == "zero_head_dim":
        query, kc, vc = query[..., :0], kc[..., :0], vc[..., :0]
    elif case == "float_lens":
        lens = [5.9, 9]
    elif case == "bool_lens":
        lens = [5, True]
    elif case == "float_tensor_lens":
        lens = torch.tensor([5.0, 9.0])
    elif case == "float_table":
        tables = [tables[0], [float(x) for x in tables[1]]]
    elif case == "float_table_tensor":
        tables = torch.tensor([tables[0] + [-1], tables[1]], dtype=torch.float32)
    elif case == "int_query":
        query, kc, vc = query.long(), kc.long(), vc.long()
    elif case == "not_a_tensor":
        query = query.tolist()
    elif case == "impl_not_str":
        impl = ["gather"]
    with pytest.raises(ValueError, match=msg):
        paged_attention_decode(query, kc, vc, tables, lens, impl=impl)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf"), True, "0.5"])
@pytest.mark.parametrize("impl", ["loop", "gather", "fused", "native"])
def test_bad_scale_is_refused(impl, scale):
    """A scale that is not a finite number > 0 is refused by every impl, with or without validation, and by
    attention()."""
    query, kc, vc, tables, keys, _ = build_case(4, 2, 16, 4, [5])
    for validate in (True, False):
        with pytest.raises(ValueError, match="scale must be a finite number > 0"):
            paged_attention_decode(query, kc, vc, tables, [5], scale=scale, impl=impl, validate=validate)
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        attention(query[0], keys[0], keys[0], scale=scale)


@pytest.mark.parametrize("case, msg", [
    ("zero_kv_heads", "must be >= 1"),
    ("empty_context", "must be >= 1"),
    ("head_dim", "head_dim differs"),
    ("rank", "query must be"),
    ("int", "floating-point"),
])
def test_attention_boundary(case, msg):
    """attention() refuses zero sizes (num_kv_heads 0 used to raise ZeroDivisionError), mismatched head_dim, wrong
    ranks and integer tensors with a ValueError."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(4, 8, generator=g), torch.randn(6, 2, 8, generator=g)
    v = k.clone()
    if case == "zero_kv_heads":
        k, v = k[:, :0], v[:, :0]
    elif case == "empty_context":
        k, v = k[:0], v[:0]
    elif case == "head_dim":
        q = q[:, :4]
    elif case == "rank":
        q = q[None, None]
    elif case == "int":
        q = q.long()
    with pytest.raises(ValueError, match=msg):
        attention(q, k, v)


@pytest.mark.parametrize("table, context_len, msg", [
    ([0, 99], 6, "outside the pool"),
    ([0], 6, "needs 2 blocks"),
    ([0, 1.5], 6, "must be an integer"),
    ([0, 1], 6.0, "context_len must be an integer"),
    ([0, 1], 0, "context_len must be an integer >= 1"),
])
def test_gather_kv_refuses_bad_tables(table, context_len, msg):
    """gather_kv checks its table against the pool (it used to raise IndexError or read a truncated id)."""
    _, kc, vc, _, _, _ = build_case(4, 2, 16, 4, [5])
    with pytest.raises(ValueError, match=msg):
        gather_kv(kc, vc, table, context_len)


def test_gather_kv_reads_an_aliased_table():
    """A table naming one block twice (the bug lab's aliased-blocks fault) is read as written, not refused."""
    _, kc, vc, _, _, _ = build_case(4, 2, 16, 4, [5])
    keys, values = gather_kv(kc, vc, [3, 3], 6)
    assert torch.equal(keys, torch.cat([kc[3], kc[3, :2]])) and torch.equal(values, torch.cat([vc[3], vc[3, :2]]))
