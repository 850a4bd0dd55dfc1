"""Page 7's split-K and layouts (lessons.beyond): the reduce over partitions equals plain softmax attention (float64,
computed here from the gathered tensors, independently of lessons.beyond) for every partition size, even with a
partition that holds a single token; the plan covers the context in whole blocks; the article's batch reads the same
keys through our slots, FlashAttention's block_table and FlashInfer's CSR table (NHD and HND)."""

from __future__ import annotations

import pytest
import torch

from lessons.beyond import (PARTITION_SIZES, SplitCase, layout_views, partials, reduce_partials, split_k_run,
                            split_plan, token_number)


@pytest.mark.parametrize("size", PARTITION_SIZES)
def test_split_reduce_equals_plain_attention(size):
    """context 1000 (not a multiple of any size): rel err < 1e-5 against plain float64 softmax; shares sum to 1."""
    run = split_k_run(SplitCase(context_len=1000, partition_size=size, num_heads=4, head_dim=16, seed=3), reps=1)
    assert run.ok and run.rel_err < 1e-5 and run.unsplit_rel_err < 1e-5
    assert len(run.plan) == -(-1000 // size)
    assert torch.allclose(run.weights.sum(0), torch.ones(4, dtype=run.weights.dtype), atol=1e-6)


def test_partials_against_a_reference_written_here():
    """A last partition of one token, scores of very different sizes: the reduce is the softmax of this test's own
    float64 computation (scaled tolerance)."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 8, generator=gen) * 4, torch.randn(65, 3, 8, generator=gen),
               torch.randn(65, 3, 8, generator=gen))
    out, share = reduce_partials(*partials(q, k, v, 16, 0.5))
    w = torch.softmax(torch.einsum("hd,nhd->hn", q.double(), k.double()) * 0.5, -1)
    want = torch.einsum("hn,nhd->hd", w, v.double())
    assert (out.double() - want).abs().max() <= 1e-5 * max(1.0, want.abs().max().item())
    assert share.shape == (5, 3) and torch.allclose(share[-1].double(), w[:, 64], atol=1e-6)


def test_the_plan_reads_whole_blocks_and_refuses_a_partition_that_does_not():
    plan = split_plan(100, 32, 16)
    assert [(p.start, p.end, p.blocks) for p in plan] == [(0, 32, (0, 1)), (32, 64, (2, 3)), (64, 96, (4, 5)),
                                                         (96, 100, (6,))]
    with pytest.raises(ValueError, match="multiple of block_size"):
        split_plan(100, 24, 16)
    with pytest.raises(ValueError, match="context_len"):
        split_plan(0, 32, 16)


def test_the_layouts_read_the_same_keys():
    """Every token of A, B, C (10, 6, 15 tokens) is read back as its own number through all four indexings, and the
    HND tensor is a real second tensor (not a view of ours)."""
    view = layout_views()
    want = [[token_number(s, i) for i in range(n)] for s, n in enumerate((10, 6, 15))]
    assert view.agree and all(reads == want for reads in view.reads.values())
    assert view.indptr == [0, 3, 5, 9] and view.last_page_len == [2, 2, 3]
    assert view.hnd.data_ptr() != view.key_cache.data_ptr() and view.hnd.shape == (12, 2, 4, 4)
