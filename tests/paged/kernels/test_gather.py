"""The impl registered as "gather" (paged/kernels/gather.py, reused workspace buffers) gives what the reference path
gives: paged.attention.gather_kv then attention, sequence by sequence."""

import pytest
import torch

from paged.attention import attention, gather_kv, paged_attention_decode
from paged.attention import DECODE_IMPLS
from paged.kernels.workspace import workspace

pytestmark = pytest.mark.kernels


def reference(query, key_cache, value_cache, tables, lens):
    return torch.stack([attention(query[b], *gather_kv(key_cache, value_cache, tables[b], n))
                        for b, n in enumerate(lens)])


@pytest.mark.parametrize("heads", [(4, 4), (8, 2)])
def test_registered_gather_equals_gather_kv_then_attention(heads):
    """Batches of uneven and equal lengths, a larger call then a smaller one (its buffers reused), GQA and not: the
    registered gather matches gather_kv + attention, and really writes into the workspace."""
    from paged.kernels.gather import gather_decode

    assert DECODE_IMPLS["gather"] is gather_decode
    num_heads, num_kv_heads = heads
    g = torch.Generator().manual_seed(3)
    key_cache, value_cache = (torch.randn(40, 4, num_kv_heads, 8, generator=g) for _ in range(2))
    perm = torch.randperm(40, generator=g).tolist()
    for lens in ([13, 3, 9, 16], [5, 5], [1]):
        tables = [perm[8 * b: 8 * b + -(-n // 4)] for b, n in enumerate(lens)]
        query = torch.randn(len(lens), num_heads, 8, generator=g)
        got = paged_attention_decode(query, key_cache, value_cache, tables, lens, impl="gather")
        want = reference(query, key_cache, value_cache, tables, lens)
        assert got.shape == want.shape
        assert (got - want).abs().max() <= 1e-5 * want.abs().max()
    assert any(key[0] == "gather_k" for key in workspace.buffers)
