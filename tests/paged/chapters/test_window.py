"""paged/chapters/window.py: the window's mask against transformers' own, and the paged reads against the contiguous
reference, with holes at the front of the tables."""

from __future__ import annotations

import pytest
import torch

from paged.attention import attention
from paged.chapters.window import (HOLE, max_blocks_held, num_skipped_blocks, num_skipped_tokens, paged_window_decode,
                                   paged_window_prefill, window_attention, window_mask, window_start)

pytestmark = pytest.mark.chapters


def test_mask_is_transformers_sliding_window_causal_mask():
    """window_mask equals transformers 5.19's sliding_window_causal_mask_function for every (query, key) pair,
    chunks (q_len < context_len) included: a token reads itself and the W - 1 before it."""
    masking = pytest.importorskip("transformers.masking_utils")
    for window, q_len, ctx in [(1, 5, 5), (3, 7, 7), (4, 2, 9), (20, 6, 6)]:
        fn = masking.sliding_window_causal_mask_function(window)
        zero = torch.tensor(0)
        expected = fn(zero, zero, torch.arange(ctx - q_len, ctx)[:, None], torch.arange(ctx)[None, :])
        assert torch.equal(window_mask(q_len, ctx, window), expected), (window, q_len, ctx)


def test_skipped_tokens_and_the_bound():
    """num_skipped_tokens is vLLM's max(0, n - W + 1); blocks wholly before it; the decode bound ceil(W/bs) + 1."""
    assert [num_skipped_tokens(n, 4) for n in range(8)] == [0, 0, 0, 0, 1, 2, 3, 4]
    assert [num_skipped_blocks(n, 4, 2) for n in range(9)] == [0, 0, 0, 0, 0, 1, 1, 2, 2]
    assert window_start(7, 4) == 4 and window_start(2, 4) == 0
    assert max_blocks_held(8, 4) == 3 and max_blocks_held(9, 4) == 4
    with pytest.raises(ValueError, match="sliding_window"):
        max_blocks_held(0, 4)


def test_a_window_longer_than_the_context_is_plain_causal_attention():
    """W >= context_len: window_attention equals paged.attention.attention(causal=True); a short W differs."""
    torch.manual_seed(0)
    q, k, v = torch.randn(6, 4, 8), torch.randn(6, 2, 8), torch.randn(6, 2, 8)
    full = attention(q, k, v, causal=True)
    torch.testing.assert_close(window_attention(q, k, v, window=6), full, rtol=1e-5, atol=1e-6)
    assert (window_attention(q, k, v, window=2) - full).abs().max() > 1e-2


def scattered_pool(lens: list[int], window: int, block_size: int, q_lens: list[int] | None = None,
                   num_blocks: int = 40, seed: int = 0):
    """A pool of random K/V, each sequence's tokens in shuffled blocks, the blocks wholly before the window of its
    first query (the newest token, or the first of its q_lens newest) made holes, their contents scribbled over.
    Returns (key_cache, value_cache, tables, contiguous keys and
    values per sequence)."""
    g = torch.Generator().manual_seed(seed)
    key_cache = torch.randn(num_blocks, block_size, 2, 8, generator=g)
    value_cache = torch.randn(num_blocks, block_size, 2, 8, generator=g)
    free = torch.randperm(num_blocks, generator=g).tolist()
    tables, keys, values = [], [], []
    for b, n in enumerate(lens):
        table = [free.pop() for _ in range(-(-n // block_size))]
        idx = torch.tensor([table[i // block_size] * block_size + i % block_size for i in range(n)])
        keys.append(key_cache.flatten(0, 1)[idx].clone())
        values.append(value_cache.flatten(0, 1)[idx].clone())
        for i in range(num_skipped_blocks(n - (q_lens[b] if q_lens else 1), window, block_size)):
            key_cache[table[i]] = 1e3  # a freed block may hold anything: it must not be read
            table[i] = HOLE
        tables.append(table)
    return key_cache, value_cache, tables, keys, values


@pytest.mark.parametrize("window,block_size", [(1, 4), (3, 2), (5, 4), (64, 4)])
def test_paged_decode_equals_the_contiguous_reference(window, block_size):
    """paged_window_decode over tables with holes == window_attention over each sequence's contiguous K/V."""
    lens = [1, 7, 13, 20]
    key_cache, value_cache, tables, keys, values = scattered_pool(lens, window, block_size)
    width = max(map(len, tables))
    padded = torch.tensor([t + [-1] * (width - len(t)) for t in tables])
    query = torch.randn(len(lens), 4, 8, generator=torch.Generator().manual_seed(1))
    out = paged_window_decode(query, key_cache, value_cache, padded, torch.tensor(lens), window)
    expected = torch.stack([window_attention(query[b], keys[b], values[b], window) for b in range(len(lens))])
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("impl", ["gather", "loop"])
def test_paged_prefill_and_chunks_equal_the_contiguous_reference(impl):
    """paged_window_prefill: a whole prompt and a chunk after cached tokens (holes before its first window) ==
    window_attention over the contiguous K/V, for both impls."""
    window, block_size, lens, q_lens = 5, 2, [9, 14], [9, 4]
    key_cache, value_cache, tables, keys, values = scattered_pool(lens, window, block_size, q_lens)
    assert tables[1][:3] == [HOLE] * 3 and HOLE not in tables[0]  # the chunk's holes: tokens 0-5 of 14
    query = torch.randn(sum(q_lens), 4, 8, generator=torch.Generator().manual_seed(2))
    out = paged_window_prefill(query, key_cache, value_cache, tables, lens, q_lens, window, impl=impl)
    expected = torch.cat([window_attention(query[:9], keys[0], values[0], window),
                          window_attention(query[9:], keys[1], values[1], window)])
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_a_hole_inside_the_window_is_refused():
    """A block freed while its window still reads it: both paged reads raise a ValueError, never read garbage."""
    key_cache, value_cache = torch.zeros(4, 2, 1, 2), torch.zeros(4, 2, 1, 2)
    table = [HOLE, HOLE, 3]  # tokens 0-5; with W = 4 the newest token 5 reads 2-5, and block 1 is a hole
    with pytest.raises(ValueError, match="hole"):
        paged_window_decode(torch.zeros(1, 1, 2), key_cache, value_cache, torch.tensor([table]), torch.tensor([6]), 4)
    with pytest.raises(ValueError, match="-1"):
        paged_window_prefill(torch.zeros(1, 1, 2), key_cache, value_cache, [table], [6], [1], 4)
    with pytest.raises(ValueError, match="hole"):
        paged_window_prefill(torch.zeros(1, 1, 2), key_cache, value_cache, [table], [6], [1], 4, impl="loop")
