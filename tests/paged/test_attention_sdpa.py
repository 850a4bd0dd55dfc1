"""The causal mask has one definition (paged.attention.causal_mask), and attention_sdpa, the fast path the paged
prefill takes, gives the reference `attention`'s result: chunks after cached tokens, whole prompts, grouped heads,
every dtype, decode queries, a given scale."""

import pytest
import torch

from helpers import assert_close_scaled
from paged.attention import attention, attention_sdpa, causal_mask, tolerance

pytestmark = pytest.mark.article

HEADS = [(4, 4), (4, 2), (8, 1)]  # (query heads, kv heads): MHA, GQA, MQA


@pytest.mark.parametrize("q_len, context_len", [(0, 0), (0, 3), (1, 1), (1, 6), (3, 3), (3, 8), (7, 7)])
def test_causal_mask_lets_each_query_see_its_own_past(q_len, context_len):
    """The queries are the context's last q_len tokens: query i (token context_len - q_len + i) sees exactly the
    keys up to and including its own token."""
    mask = causal_mask(q_len, context_len)
    assert mask.dtype == torch.bool and mask.shape == (q_len, context_len)
    for i in range(q_len):
        token = context_len - q_len + i
        assert mask[i].tolist() == [key <= token for key in range(context_len)]


@pytest.mark.parametrize("q_len, context_len, msg", [
    (4, 3, r"q_len \(4\) cannot exceed context_len \(3\)"),
    (-1, 3, "q_len must be an integer >= 0"),
    (1.0, 3, "q_len must be an integer"),
    (1, True, "context_len must be an integer"),
])
def test_causal_mask_refuses_impossible_lengths(q_len, context_len, msg):
    with pytest.raises(ValueError, match=msg):
        causal_mask(q_len, context_len)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("q_len, context_len", [(1, 1), (7, 7), (33, 33), (5, 12), (1, 9), (16, 40)])
def test_attention_sdpa_is_the_reference_causal_attention(q_len, context_len, heads, dtype):
    """Causal: a whole prompt (q_len == context_len) and a chunk after cached tokens (q_len < context_len), inputs
    of magnitude ~3, compared within the dtype's tolerance of the reference's largest value."""
    num_heads, num_kv_heads = heads
    g = torch.Generator().manual_seed(q_len * 100 + context_len)
    q = (torch.randn(q_len, num_heads, 16, generator=g, dtype=torch.float64) * 3).to(dtype)
    keys = (torch.randn(context_len, num_kv_heads, 16, generator=g, dtype=torch.float64) * 3).to(dtype)
    values = (torch.randn(context_len, num_kv_heads, 16, generator=g, dtype=torch.float64) * 3).to(dtype)
    got, want = attention_sdpa(q, keys, values, causal=True), attention(q, keys, values, causal=True)
    assert got.dtype == dtype and got.shape == want.shape == q.shape
    assert_close_scaled(got, want, rel=1e-12 if dtype == torch.float64 else tolerance(dtype))


@pytest.mark.parametrize("heads", HEADS)
def test_attention_sdpa_decode_and_given_scale_match_the_reference(heads):
    """Not causal, a decode query [num_heads, head_dim] and a prefill one, default and given scale."""
    num_heads, num_kv_heads = heads
    g = torch.Generator().manual_seed(num_heads + num_kv_heads)
    keys, values = torch.randn(11, num_kv_heads, 8, generator=g) * 2, torch.randn(11, num_kv_heads, 8, generator=g)
    for q in (torch.randn(num_heads, 8, generator=g), torch.randn(5, num_heads, 8, generator=g)):
        for scale in (None, 0.05):
            got, want = attention_sdpa(q, keys, values, scale=scale), attention(q, keys, values, scale=scale)
            assert got.shape == want.shape == q.shape
            assert_close_scaled(got, want, rel=tolerance(q.dtype))


def test_attention_sdpa_of_no_queries_is_empty():
    keys = torch.randn(4, 2, 8)
    assert attention_sdpa(torch.randn(0, 4, 8), keys, keys, causal=True).shape == (0, 4, 8)


@pytest.mark.parametrize("q, scale, msg", [
    (torch.randn(5, 4, 8), None, r"q_len \(5\) cannot exceed context_len \(4\)"),
    (torch.randn(2, 4, 8), 0.0, "scale must be a finite number > 0"),
    (torch.randn(2, 3, 8), None, "must be a multiple of num_kv_heads"),
    (torch.randn(2, 4, 8).long(), None, "floating-point"),
])
def test_attention_sdpa_refuses_what_the_reference_refuses(q, scale, msg):
    keys = torch.randn(4, 2, 8)
    for fn in (attention, attention_sdpa):
        with pytest.raises(ValueError, match=msg):
            fn(q, keys, keys, scale=scale, causal=True)
