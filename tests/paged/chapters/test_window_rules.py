"""paged/chapters/window.py's rules the mutation run showed unheld: each argument named in its error, the bounds met
exactly, dtypes (float64 kept, mixed and half inputs), an explicit scale, keys from a later start, batches of three and
none. The reference is written out here query by query in float64 (softmax over the keys p - W + 1 … p)."""

from __future__ import annotations

import math

import pytest
import torch

from paged.chapters.window import (HOLE, max_blocks_held, paged_window_decode, paged_window_prefill, window_attention,
                                   window_mask, windowed_rows)

pytestmark = pytest.mark.chapters


def reference(q, keys, values, window, scale=None, start=0):
    """Sliding-window attention by hand in float64: q [q_len, H, D] the context's last q_len tokens, keys/values
    [tokens start …, K, D]; query i at position ctx - q_len + i reads keys max(start, p - W + 1) … p."""
    q64, k64, v64 = q.double(), keys.double(), values.double()
    q_len, heads, dim = q.shape
    ctx, group = start + keys.shape[0], heads // keys.shape[1]
    scale = 1 / math.sqrt(dim) if scale is None else scale
    out = torch.zeros(q_len, heads, dim, dtype=torch.float64)
    for i in range(q_len):
        p = ctx - q_len + i
        lo = max(start, p - window + 1)
        for h in range(heads):
            ks, vs = k64[lo - start:p - start + 1, h // group], v64[lo - start:p - start + 1, h // group]
            w = torch.softmax(ks @ q64[i, h] * scale, dim=0)
            out[i, h] = w @ vs
    return out


def rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("kwargs,name", [
    (dict(q_len=1, context_len=3, window=0), "sliding_window"),
    (dict(q_len=-1, context_len=3, window=2), "q_len"),
    (dict(q_len=0, context_len=-1, window=2), "context_len"),
    (dict(q_len=1, context_len=3, window=2, start=-1), "start"),
    (dict(q_len=1, context_len=3, window=2, start=3), "start"),
    (dict(q_len=3, context_len=3, window=2, start=1), "start"),
])
def test_window_mask_names_the_bad_argument(kwargs, name):
    """Each bad argument of window_mask is refused by its own name at the start of the message (start may reach
    context_len - q_len, never past it)."""
    with pytest.raises(ValueError, match=f"^{name} must"):
        window_mask(**kwargs)


def test_window_mask_edges():
    """q_len 0 and context_len 0 give empty masks; start = context_len - q_len is allowed (the keys are the queries'
    own); a longer query than context is refused naming both; the mask lands on the device asked for (meta)."""
    assert window_mask(0, 3, 2).shape == (0, 3) and window_mask(0, 0, 1).shape == (0, 0)
    assert window_mask(2, 5, 2, start=3).tolist() == [[True, False], [True, True]]
    with pytest.raises(ValueError, match=r"q_len \(4\) must be <= context_len \(3\)"):
        window_mask(4, 3, 2)
    assert window_mask(2, 4, 2, device="meta").device.type == "meta"


def test_max_blocks_held_bounds_and_names():
    """A window of 1 and a block size of 1 are allowed (ceil(1 / 4) + 1 = 2, ceil(3 / 1) + 1 = 4); a block size of
    0 is refused by its name, as a window of 0 by its."""
    assert max_blocks_held(1, 4) == 2 and max_blocks_held(3, 1) == 4
    with pytest.raises(ValueError, match="^block_size must"):
        max_blocks_held(4, 0)
    with pytest.raises(ValueError, match="^sliding_window must"):
        max_blocks_held(0, 4)


def test_window_attention_equals_the_hand_reference_with_a_scale():
    """A window shorter than the context, keys from token 0 by default, an explicit scale: the float64 reference."""
    q, k, v = rand(5, 4, 8), rand(9, 2, 8, seed=1), rand(9, 2, 8, seed=2)
    torch.testing.assert_close(window_attention(q, k, v, 3, scale=0.3), reference(q, k, v, 3, 0.3).float(),
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(window_attention(q, k, v, 3), reference(q, k, v, 3).float(), rtol=1e-5, atol=1e-6)


def test_window_attention_dtypes():
    """float64 stays float64 (to 1e-12); half keys with a float32 query and a half query with float32 keys are
    both upcast (float32 accuracy against the reference of the same values); a half query gives a half result."""
    q, k, v = rand(4, 4, 8, dtype=torch.float64), rand(6, 2, 8, seed=1, dtype=torch.float64), rand(6, 2, 8, seed=2,
                                                                                                  dtype=torch.float64)
    out = window_attention(q, k, v, 3)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, reference(q, k, v, 3), rtol=1e-12, atol=1e-12)
    qf, kh, vh = q.float(), k.half(), v.half()
    torch.testing.assert_close(window_attention(qf, kh, vh, 3), reference(qf, kh, vh, 3).float(), rtol=1e-5,
                               atol=1e-5)
    qh, kf, vf = q.half(), k.float(), v.float()
    out = window_attention(qh, kf, vf, 3)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, reference(qh, kf, vf, 3).half(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("keys_shape,values_shape,heads", [((6, 2), (6, 2, 8), 4), ((6, 2, 8), (6, 2, 4), 4),
                                                           ((6, 3, 8), (6, 3, 8), 4)])
def test_window_attention_refuses_bad_shapes_naming_them(keys_shape, values_shape, heads):
    """Keys not 3-D, keys and values of different shapes, heads not a multiple of kv heads: each alone refused,
    the message naming both shapes."""
    q = rand(2, heads, 8)
    with pytest.raises(ValueError, match=re_shapes(keys_shape, values_shape)):
        window_attention(q, torch.zeros(keys_shape), torch.zeros(values_shape), 3)


def re_shapes(a, b):
    return r"got \(" + ", ".join(map(str, a)) + r"\) and \(" + ", ".join(map(str, b)) + r"\)"


def contiguous_pool(lens, block_size=2, num_blocks=30, seed=0, dtype=torch.float32):
    """Each sequence's tokens in consecutive blocks (sequence b after sequence b - 1), holes where its window never
    reads; returns key_cache, value_cache, tables, per-sequence contiguous keys and values."""
    kc, vc = rand(num_blocks, block_size, 2, 8, seed=seed, dtype=dtype), rand(num_blocks, block_size, 2, 8,
                                                                            seed=seed + 1, dtype=dtype)
    tables, keys, values, nxt = [], [], [], 1
    for n in lens:
        nb = -(-n // block_size)
        table = list(range(nxt, nxt + nb))
        nxt += nb
        keys.append(kc[table].flatten(0, 1)[:n])
        values.append(vc[table].flatten(0, 1)[:n])
        tables.append(table)
    return kc, vc, tables, keys, values


def test_prefill_of_three_sequences_with_a_scale_and_a_late_start():
    """Three sequences (query lens 2, 3, 1, the second a chunk whose window starts past token 0): each query row
    equals the reference of its own sequence, with the scale given."""
    lens, q_lens, window = [4, 11, 6], [2, 3, 1], 3
    kc, vc, tables, keys, values = contiguous_pool(lens)
    tables[1][0] = HOLE  # tokens 0-1 of the chunk's sequence: no query of tokens 8-10 reads them (W = 3)
    query = rand(sum(q_lens), 4, 8, seed=5)
    out = paged_window_prefill(query, kc, vc, tables, lens, q_lens, window, scale=0.4)
    expected, at = [], 0
    for b, n in enumerate(q_lens):
        expected.append(reference(query[at:at + n], keys[b], values[b], window, 0.4))
        at += n
    torch.testing.assert_close(out, torch.cat(expected).float(), rtol=1e-5, atol=1e-5)


def test_prefill_of_no_sequence_is_empty():
    """An empty batch gives an empty result of the query's shape."""
    kc, vc = torch.zeros(2, 2, 2, 8), torch.zeros(2, 2, 2, 8)
    out = paged_window_prefill(torch.zeros(0, 4, 8), kc, vc, [], [], [], 3)
    assert out.shape == (0, 4, 8)


def test_decode_dtypes_scale_and_int32_lengths():
    """Decode with int32 context lengths, an explicit scale, float64 (to 1e-12), a half query over a float32
    cache and a float32 query over a half cache: each equals the reference of the same values; a half query
    gives a half result."""
    lens, window = [3, 9], 4
    for q_dtype, c_dtype, tol in [(torch.float64, torch.float64, 1e-12), (torch.float16, torch.float32, 2e-3),
                                  (torch.float32, torch.float16, 1e-5)]:
        kc, vc, tables, keys, values = contiguous_pool(lens, dtype=c_dtype)
        tables[1][0] = HOLE
        width = max(map(len, tables))
        padded = torch.tensor([t + [-1] * (width - len(t)) for t in tables])
        query = rand(2, 4, 8, seed=7, dtype=q_dtype)
        out = paged_window_decode(query, kc, vc, padded, torch.tensor(lens, dtype=torch.int32), window, scale=0.5)
        assert out.dtype == q_dtype
        expected = torch.stack([reference(query[b][None], keys[b], values[b], window, 0.5)[0] for b in range(2)])
        torch.testing.assert_close(out, expected.to(q_dtype), rtol=tol, atol=tol)


def test_decode_hole_message():
    """A hole inside a window: the message says so in full."""
    kc, vc = torch.zeros(4, 2, 1, 2), torch.zeros(4, 2, 1, 2)
    with pytest.raises(ValueError, match="a token inside a sliding window sits in a hole of its block table: a block "
                                         "was freed while its window still reads it$"):
        paged_window_decode(torch.zeros(1, 1, 2), kc, vc, torch.tensor([[HOLE, HOLE, 3]]), torch.tensor([6]), 4)


def test_windowed_rows_is_windowed_causal_attention_per_row():
    """windowed_rows: None without a window; with W = 3, each row of a [B, T] batch (GQA 4 heads on 2) equals the
    hand reference of its own tokens from position 0."""
    assert windowed_rows(None) is None
    backend = windowed_rows(3)
    q, k, v = rand(2, 7, 4, 8), rand(2, 7, 2, 8, seed=1), rand(2, 7, 2, 8, seed=2)
    out = backend(0, q, k, v)
    assert out.shape == (2, 7, 4, 8)
    for b in range(2):
        torch.testing.assert_close(out[b], reference(q[b], k[b], v[b], 3).float(), rtol=1e-5, atol=1e-5)


def test_masks_are_built_on_the_inputs_device():
    """window_attention and windowed_rows on the meta device run through (shape-only): their masks are built where
    the query is; a mask left on the CPU would be refused by torch."""
    q, k = torch.empty(3, 4, 8, device="meta"), torch.empty(5, 2, 8, device="meta")
    out = window_attention(q, k, k, 2)
    assert out.device.type == "meta" and out.shape == (3, 4, 8)
    qq, kk = torch.empty(1, 5, 4, 8, device="meta"), torch.empty(1, 5, 2, 8, device="meta")
    rows = windowed_rows(2)(0, qq, kk, kk)
    assert rows.device.type == "meta" and rows.shape == (1, 5, 4, 8)


def test_decode_with_uint8_lengths():
    """context_lens as uint8 (an integer tensor whose lens - W would wrap below 0): the reference's result, a
    context shorter than the window included."""
    lens, window = [3, 9], 4
    kc, vc, tables, keys, values = contiguous_pool(lens)
    tables[1][0] = HOLE
    padded = torch.tensor([t + [-1] * (5 - len(t)) for t in tables])
    query = rand(2, 4, 8, seed=9)
    out = paged_window_decode(query, kc, vc, padded, torch.tensor(lens, dtype=torch.uint8), window)
    expected = torch.stack([reference(query[b][None], keys[b], values[b], window)[0] for b in range(2)])
    torch.testing.assert_close(out, expected.float(), rtol=1e-5, atol=1e-5)
