"""paged/kernels/native_ops.py: the model's small ops in C (RMSNorm, RoPE, the K/V write) against torch's own ops,
which stay the reference; where they may not run (autograd, other dtypes, odd layouts) they must decline, and the
engine must take them where they fit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from paged.config import CacheConfig, ModelConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.kernels import native_ops
from paged.kv_cache import write_kv
from paged.model import ByteTokenizer, TinyLlama
from paged.model.rope import apply_rope

pytestmark = pytest.mark.kernels


def ulps_apart(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a - b| in units of float32 spacing at b's magnitude (scaled to the values compared)."""
    spacing = torch.finfo(torch.float32).eps * b.abs().clamp_min(torch.finfo(torch.float32).tiny)
    return float(((a - b).abs() / spacing).max()) if a.numel() else 0.0


@pytest.mark.parametrize("shape", [(1, 5), (3, 17), (32, 128), (2, 7, 576), (4, 1)])
def test_rms_norm_is_torchs_within_float_rounding(shape):
    """Same math as F.rms_norm; only the sum of squares is added in another order, so a few ulps at most."""
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g) * 3
    weight = torch.randn(shape[-1], generator=g)
    with torch.no_grad():
        got = native_ops.rms_norm(x, weight, 1e-5)
    assert got is not None and got.shape == x.shape
    expected = F.rms_norm(x, (shape[-1],), weight, eps=1e-5)
    assert ulps_apart(got, expected) <= 8
    exact = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-5) * weight.double())
    assert ulps_apart(got.double(), exact) <= 8


def test_rms_norm_with_residual_adds_in_place_then_norms_the_sum():
    g = torch.Generator().manual_seed(1)
    x, residual, weight = torch.randn(6, 40, generator=g), torch.randn(6, 40, generator=g), torch.randn(40, generator=g)
    total = x + residual
    with torch.no_grad():
        got = native_ops.rms_norm(x, weight, 1e-6, residual=residual)
    assert torch.equal(x, total)  # the sum, written into x, rounded as torch rounds it
    assert ulps_apart(got, F.rms_norm(total, (40,), weight, eps=1e-6)) <= 8


@pytest.mark.parametrize("heads,dim", [(6, 32), (1, 2), (3, 64), (2, 10)])
@pytest.mark.parametrize("one_lookup", [False, True])
def test_rope_in_place_equals_apply_rope_exactly(heads, dim, one_lookup):
    """x * cos + roll(x) * sin as two rounded products and a rounded sum: bit for bit torch's result, also for
    x a narrow of a wider row (the model's q|k inside q|k|v), and cos/sin as views of one [N, 2, D] lookup."""
    g = torch.Generator().manual_seed(heads * dim)
    wide = torch.randn(9, heads + 2, dim, generator=g)
    x = wide.narrow(1, 0, heads)
    if one_lookup:
        trig = torch.randn(9, 2, dim, generator=g)
        cos, sin = trig.narrow(1, 0, 1), trig.narrow(1, 1, 1)
    else:
        cos, sin = torch.randn(9, 1, dim, generator=g), torch.randn(9, 1, dim, generator=g)
    expected = apply_rope(x, cos, sin)
    untouched = wide[:, heads:].clone()
    with torch.no_grad():
        got = native_ops.rope_(x, cos, sin)
    assert got is x and torch.equal(x, expected)
    assert torch.equal(wide[:, heads:], untouched)  # nothing outside the narrow is written


@pytest.mark.parametrize("halves", [False, True])
def test_silu_mul_is_torchs_within_float_rounding(halves):
    """gate = silu(gate) * up in place, on contiguous rows or on the two halves of one [N, 2I] matmul output; the
    exp inside is the kernel's own (within 2 ulps), so a few ulps from torch's. Extremes included: +-inf and NaN
    give torch's inf and NaN; below -87 the kernel's exp is 0 where torch's is subnormal, so silu there is 0
    instead of a number under 1e-35."""
    g = torch.Generator().manual_seed(3)
    both = torch.randn(7, 2 * 37, generator=g) * 6
    both[0, :8] = torch.tensor([0.0, 88.0, -88.0, 1e-30, -1e-30, float("inf"), float("-inf"), float("nan")])
    gate, up = ((both.narrow(1, 0, 37), both.narrow(1, 37, 37)) if halves
                else (both[:, :37].clone(), both[:, 37:].clone()))
    expected = F.silu(gate.clone()) * up
    with torch.no_grad():
        got = native_ops.silu_mul_(gate, up)
    assert got is gate
    assert torch.equal(got.isnan(), expected.isnan()) and torch.equal(got.isinf(), expected.isinf())
    normal = expected.isfinite() & (expected.abs() > 1e-30)
    assert ulps_apart(got[normal], expected[normal]) <= 16
    tiny = expected.isfinite() & ~normal
    assert tiny.sum() >= 3 and float((got[tiny] - expected[tiny]).abs().max()) <= 1e-30


def test_write_rows_is_index_copy_and_refuses_a_slot_outside_the_pool():
    g = torch.Generator().manual_seed(2)
    caches = [torch.randn(5, 4, 2, 8, generator=g) for _ in range(2)]
    qkv = torch.randn(3, 6, 8, generator=g)  # k and v as narrows of a wider row, as the model hands them
    key, value = qkv.narrow(1, 2, 2), qkv.narrow(1, 4, 2)
    slots = torch.tensor([19, 0, 7])
    expected = [c.clone().flatten(0, 1).index_copy_(0, slots, rows).view_as(c) for c, rows in zip(caches, (key, value))]
    assert native_ops.write_rows(*caches, key, value, slots)
    assert all(torch.equal(c, e) for c, e in zip(caches, expected))
    before = [c.clone() for c in caches]
    for bad in (20, -1):
        with pytest.raises(ValueError, match=f"slot {bad} "):
            native_ops.write_rows(*caches, key, value, torch.tensor([3, bad, 4]))
        assert all(torch.equal(c, b) for c, b in zip(caches, before))  # nothing written, not even slot 3


def test_the_ops_decline_where_they_must_not_run():
    x, weight = torch.randn(4, 8, requires_grad=True), torch.ones(8)
    assert native_ops.rms_norm(x, weight, 1e-5) is None  # autograd on: the in-place sum would break it
    with torch.no_grad():
        assert native_ops.rms_norm(x.double(), weight.double(), 1e-5) is None
        assert native_ops.rms_norm(x.t(), torch.ones(4), 1e-5) is None  # not contiguous
        assert native_ops.rms_norm(x, torch.ones(7), 1e-5) is None  # weight of the wrong size
        assert native_ops.rope_(torch.randn(2, 3, 5), torch.ones(2, 1, 5), torch.ones(2, 1, 5)) is None  # odd D
        assert native_ops.rope_(torch.randn(2, 3, 4)[:, :, ::2], torch.ones(2, 1, 2), torch.ones(2, 1, 2)) is None
        wide = torch.randn(3, 10)
        assert native_ops.silu_mul_(wide[:, :4], wide[:, 4:8].clone()) is None  # rows not the same stride apart
        assert native_ops.silu_mul_(wide[:, ::2], wide[:, 1::2]) is None  # a row not contiguous
        with native_ops.torch_ops():
            assert native_ops.rms_norm(x, weight, 1e-5) is None
        assert native_ops.rms_norm(x, weight, 1e-5) is not None  # and on again after the block
    cache = torch.zeros(2, 4, 1, 8, dtype=torch.float16)
    assert not native_ops.write_rows(cache, cache.clone(), torch.ones(1, 1, 8), torch.ones(1, 1, 8),
                                     torch.tensor([0]))  # dtypes differ: torch's copy casts, a byte copy cannot


def test_without_the_library_everything_runs_on_torchs_ops(monkeypatch):
    """No compiler (the library could not be had): the ops decline and the model's output is torch's, exactly."""
    torch.manual_seed(1)
    model = TinyLlama(ModelConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                  num_attention_heads=2, num_key_value_heads=1)).eval()
    ids = torch.randint(0, 259, (1, 6))
    with torch.no_grad(), native_ops.torch_ops():
        expected = model(ids)
    monkeypatch.setattr(native_ops, "_loaded", [None])
    with torch.no_grad():
        assert native_ops.rms_norm(torch.ones(2, 4), torch.ones(4), 1e-5) is None
        assert torch.equal(model(ids), expected)


def test_write_kv_fast_takes_the_c_copy_and_keeps_its_errors():
    """write_kv(fast=True) lands each row at its slot; unvalidated, a slot outside the pool is still a ValueError
    (the C write checks it: torch's index_copy_ would raise another error)."""
    caches = [torch.zeros(3, 4, 2, 8) for _ in range(2)]
    key, value = torch.randn(2, 2, 8), torch.randn(2, 2, 8)
    write_kv(*caches, key, value, torch.tensor([5, 11]), fast=True)
    assert torch.equal(caches[0].flatten(0, 1)[[5, 11]], key) and torch.equal(caches[1].flatten(0, 1)[[5, 11]], value)
    with pytest.raises(ValueError):
        write_kv(*caches, key, value, torch.tensor([5, 12]), validate=False, pads=False, fast=True)


def _generate(model, prompts):
    engine = LLMEngine(model, ByteTokenizer(), CacheConfig(block_size=4, num_blocks=64, seed=3),
                       SchedulerConfig(max_num_batched_tokens=256, max_num_seqs=8), attn_impl="native",
                       record=False)
    return [out.token_ids for out in engine.generate(prompts, SamplingParams(max_tokens=12, ignore_eos=True))]


def test_model_logits_and_engine_tokens_match_torchs_ops(monkeypatch):
    """The whole model with the C ops against torch's ops: logits within float rounding, the same greedy tokens;
    and the engine's decode steps really take the C ops (each is counted)."""
    torch.manual_seed(0)
    model = TinyLlama(ModelConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2)).eval()
    ids = torch.randint(0, 259, (2, 11))
    with torch.no_grad():
        with native_ops.torch_ops():
            expected = model(ids)
        got = model(ids)
    scale = float(expected.abs().max())
    assert float((got - expected).abs().max()) <= 1e-5 * scale
    prompts = ["abc", "hello world", "paged attention"]
    with native_ops.torch_ops():
        expected_tokens = _generate(model, prompts)
    calls = {name: 0 for name in native_ops._SIGNATURES}
    fns = native_ops._functions()

    def counting(name):
        def call(*args):
            calls[name] += 1
            return fns[name](*args)
        return call

    monkeypatch.setattr(native_ops, "_loaded", [{name: counting(name) for name in fns}])
    assert _generate(model, prompts) == expected_tokens
    assert all(n > 0 for n in calls.values()), calls
