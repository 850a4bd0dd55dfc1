"""attention.py's rules checked against an independent float64 softmax(q·k·scale)·v: dtypes kept, the causal mask
and the query's device, the grouped-query head mapping, the figures' weights, the reference decode's scale, and
paged decode / prefill called with their defaults (validated, impl "gather") or an empty batch."""

import math

import pytest
import torch

from paged.addressing import slot_mapping
from paged.attention import (attention, attention_sdpa, attention_weights, causal_mask, contiguous_attention_decode,
                             paged_attention_decode, paged_attention_prefill, tolerance)
from paged.attention import DECODE_IMPLS

pytestmark = pytest.mark.article


def reference(q, k, v, scale, causal=False):
    """float64 attention written out head by head: query head h reads kv head h // (H // KVH)."""
    q, k, v = q.double(), k.double(), v.double()
    squeeze = q.dim() == 2
    q = q[None] if squeeze else q
    q_len, heads, _ = q.shape
    ctx, kv_heads = k.shape[0], k.shape[1]
    out = torch.empty(q_len, heads, v.shape[2], dtype=torch.float64)
    for h in range(heads):
        kh, vh = k[:, h // (heads // kv_heads)], v[:, h // (heads // kv_heads)]
        s = q[:, h] @ kh.T * scale  # [q_len, ctx]
        if causal:
            for i in range(q_len):
                s[i, ctx - q_len + i + 1:] = -math.inf
        out[:, h] = torch.softmax(s, dim=-1) @ vh
    return out[0] if squeeze else out


def close(a, b, rel):
    """|a - b| within rel of b's magnitude."""
    return (a.double() - b.double()).abs().max().item() <= rel * max(1.0, b.double().abs().max().item())


def rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def test_tolerance_is_1e5_for_fp32_fp64_and_1e2_for_half():
    """The documented tolerances: float32 and float64 1e-5, float16 and bfloat16 1e-2."""
    assert [tolerance(d) for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16)] == [
        1e-5, 1e-5, 1e-2, 1e-2]


@pytest.mark.parametrize("attend", [attention, attention_sdpa])
def test_float64_attention_stays_float64_to_its_precision(attend):
    """Both attentions keep float64: computed and returned in it, equal to the reference far below float32's error."""
    q, k, v = rand(3, 4, 8, seed=1, dtype=torch.float64), rand(6, 2, 8, seed=2, dtype=torch.float64), \
        rand(6, 2, 8, seed=3, dtype=torch.float64)
    out = attend(q, k, v, scale=0.7, causal=True)
    assert out.dtype == torch.float64 and close(out, reference(q, k, v, 0.7, causal=True), 1e-12)


@pytest.mark.parametrize("attend", [attention, attention_sdpa])
def test_half_query_returns_half_and_fp32_accuracy_inside(attend):
    """Both attentions: a float16 query gives a float16 result within half precision of the float64 reference."""
    q, k, v = rand(2, 4, 8, seed=4, dtype=torch.float16), rand(5, 4, 8, seed=5, dtype=torch.float16), \
        rand(5, 4, 8, seed=6, dtype=torch.float16)
    out = attend(q, k, v, causal=True)
    assert out.dtype == torch.float16 and close(out, reference(q, k, v, 1 / math.sqrt(8), causal=True), 1e-2)


@pytest.mark.parametrize("attend", [attention, attention_sdpa])
def test_grouped_query_heads_read_their_kv_head(attend):
    """Both attentions, 8 query heads over 2 distinct kv heads: head h attends with kv head h // 4, as the reference."""
    q, k, v = rand(8, 16, seed=7), rand(5, 2, 16, seed=8), rand(5, 2, 16, seed=9)
    out = attend(q, k, v)
    assert out.shape == (8, 16) and close(out, reference(q, k, v, 0.25), 1e-5)


@pytest.mark.parametrize("attend", [attention, attention_sdpa])
def test_causal_prefill_matches_the_reference_and_its_mask_follows_the_query(attend):
    """Both attentions: causal prefill of 3 queries over 7 keys is the reference; the mask is on the query's device."""
    q, k, v = rand(3, 2, 4, seed=10), rand(7, 1, 4, seed=11), rand(7, 1, 4, seed=12)
    assert close(attend(q, k, v, scale=0.9, causal=True), reference(q, k, v, 0.9, causal=True), 1e-5)
    assert causal_mask(3, 7, device="meta").device.type == "meta"
    out = attend(*(x.to("meta") for x in (q, k, v)), causal=True)  # a mask on the CPU could not fill it
    assert out.device.type == "meta" and out.shape == q.shape


def test_attention_weights_are_softmax_of_scaled_scores_per_head():
    """Decode weights [H, ctx]: each row sums to 1 and is softmax(q·k_{h//group}·scale), scale given or 1/sqrt(D)."""
    q, k = rand(4, 9, seed=13), rand(6, 2, 9, seed=14)
    for scale, used in ((None, 1 / 3), (0.4, 0.4)):
        w = attention_weights(q, k, scale)
        want = torch.stack([torch.softmax(k[:, h // 2].double() @ q[h].double() * used, dim=0) for h in range(4)])
        assert w.shape == (4, 6) and close(w, want, 1e-5)
        assert close(w.sum(dim=-1), torch.ones(4, dtype=torch.float64), 1e-6)


def test_attention_weights_refuse_a_prefill_query_and_bad_inputs():
    """attention_weights takes one decode step: a 3-D query is refused naming its shape; mismatched keys too."""
    with pytest.raises(ValueError, match=r"query must be \[num_heads, head_dim\] \(one decode step\), got \(2, 4, 8\)"):
        attention_weights(torch.zeros(2, 4, 8), torch.zeros(3, 2, 8))
    with pytest.raises(ValueError):
        attention_weights(torch.zeros(4, 8), torch.zeros(3, 3, 8))  # 4 heads over 3 kv heads


def test_contiguous_reference_decode_uses_its_scale_and_lengths():
    """contiguous_attention_decode: sequence b reads its first context_lens[b] tokens, with the scale given."""
    q, k, v = rand(2, 2, 4, seed=15), rand(2, 5, 1, 4, seed=16), rand(2, 5, 1, 4, seed=17)
    out = contiguous_attention_decode(q, k, v, [3, 5], scale=2.0)
    want = torch.stack([reference(q[b], k[b, :n], v[b, :n], 2.0) for b, n in enumerate([3, 5])])
    assert close(out, want, 1e-5)


def pool_case(lens, block_size=2, heads=2, kv_heads=1, dim=4, seed=18):
    """A pool layer holding each sequence's K/V in reversed blocks, and the contiguous K/V per sequence."""
    need = [-(-n // block_size) for n in lens]
    num_blocks = sum(need)
    kc, vc = torch.zeros(num_blocks, block_size, kv_heads, dim), torch.zeros(num_blocks, block_size, kv_heads, dim)
    ids = list(range(num_blocks))[::-1]
    tables, kvs = [], []
    for b, n in enumerate(lens):
        table, ids = ids[:need[b]], ids[need[b]:]
        k, v = rand(n, kv_heads, dim, seed=seed + 2 * b), rand(n, kv_heads, dim, seed=seed + 2 * b + 1)
        slots = slot_mapping(table, 0, n, block_size)
        kc.flatten(0, 1)[slots], vc.flatten(0, 1)[slots] = k, v
        tables.append(table)
        kvs.append((k, v))
    return kc, vc, tables, kvs


def test_prefill_with_its_defaults_equals_the_causal_reference():
    """Prefill with impl and validate left to their defaults (and impl "loop") is the causal reference, scale given."""
    kc, vc, tables, kvs = pool_case([5, 3])
    qlens = [2, 3]
    q = rand(sum(qlens), 2, 4, seed=30)
    want = torch.cat([reference(q[:2], *kvs[0], 0.6, causal=True), reference(q[2:], *kvs[1], 0.6, causal=True)])
    assert close(paged_attention_prefill(q, kc, vc, tables, [5, 3], qlens, scale=0.6), want, 1e-5)
    assert close(paged_attention_prefill(q, kc, vc, tables, [5, 3], qlens, scale=0.6, impl="loop"), want, 1e-5)


def test_prefill_validates_by_default():
    """By default prefill refuses a query_len over its context_len and a table entry outside the pool."""
    kc, vc, tables, _ = pool_case([4])
    with pytest.raises(ValueError):
        paged_attention_prefill(rand(5, 2, 4), kc, vc, tables, [4], [5])
    with pytest.raises(ValueError):
        paged_attention_prefill(rand(4, 2, 4), kc, vc, [[0, 99]], [4], [4])
    with pytest.raises(ValueError, match="unknown impl"):
        paged_attention_prefill(rand(4, 2, 4), kc, vc, tables, [4], [4], impl="nope")


def test_prefill_of_no_sequence_is_an_empty_result():
    """A batch of no sequence gives an empty [0, num_heads, head_dim] result of the query's dtype."""
    kc, vc, _, _ = pool_case([2])
    out = paged_attention_prefill(torch.zeros(0, 2, 4, dtype=torch.float64), kc, vc, [], [], [], validate=False)
    assert out.shape == (0, 2, 4) and out.dtype == torch.float64


def test_decode_returns_the_query_dtype_whatever_the_kernel_returns():
    """paged_attention_decode's result has the query's dtype even when its kernel answers in another."""
    kc, vc, tables, kvs = pool_case([3])
    q = rand(1, 2, 4, seed=40, dtype=torch.float64)
    DECODE_IMPLS["_float32_rule_test"] = lambda *a: torch.zeros(1, 2, 4, dtype=torch.float32)
    try:
        out = paged_attention_decode(q, kc.double(), vc.double(), tables, [3], impl="_float32_rule_test")
    finally:
        DECODE_IMPLS.pop("_float32_rule_test")
    assert out.dtype == torch.float64
    ok = paged_attention_decode(q, kc.double(), vc.double(), tables, [3], scale=0.8)
    assert ok.dtype == torch.float64 and close(ok[0], reference(q[0], *kvs[0], 0.8), 1e-5)


@pytest.mark.parametrize("attend", [attention, attention_sdpa])
def test_no_query_row_is_an_empty_result_and_a_square_causal_prefill_is_the_reference(attend):
    """q_len 0 gives an empty [0, H, D] result; a causal prefill of all the context (q_len == ctx) is the reference."""
    k, v = rand(4, 1, 4, seed=50), rand(4, 1, 4, seed=51)
    empty = attend(torch.zeros(0, 2, 4, dtype=torch.float64), k, v, causal=True)
    assert empty.shape == (0, 2, 4) and empty.dtype == torch.float64
    q = rand(4, 2, 4, seed=52)
    assert close(attend(q, k, v, causal=True), reference(q, k, v, 0.5, causal=True), 1e-5)


@pytest.mark.parametrize("dtype, rel", [(torch.float16, 1e-2), (torch.float64, 1e-5)])
def test_attention_weights_of_half_and_float64_inputs(dtype, rel):
    """attention_weights takes the dtypes attention takes: half or float64 q and keys give the float64 softmax."""
    q, k = rand(4, 8, seed=60, dtype=dtype), rand(5, 4, 8, seed=61, dtype=dtype)
    want = torch.stack([torch.softmax(k[:, h].double() @ q[h].double() / math.sqrt(8), dim=0) for h in range(4)])
    assert close(attention_weights(q, k), want, rel)
