"""The decode parity cases shared by test_kernels, test_native and test_native_build: a paged pool built from
random contiguous K/V (the source of truth), and the sweep that compares an impl with the float64 contiguous
reference."""

from __future__ import annotations

import random

import torch

from helpers import rel_err, scattered_tables
from paged.addressing import blocks_needed, slot_mapping
from paged.attention import contiguous_attention_decode, paged_attention_decode
from paged.kv_cache import write_kv

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}


def ragged_lens(block_size: int) -> list[int]:
    return [1, block_size, block_size + 1, 54, 97]


def build(num_heads, num_kv_heads, head_dim, block_size, lens, dtype, seed=0):
    """Random contiguous K/V per sequence (the source of truth), written through slot_mapping + write_kv into
    shuffled blocks of a pool whose other blocks hold garbage. Returns query [B, H, D], key_cache, value_cache,
    -1 padded block tables [B, max_blocks + 1], and the contiguous K/V [B, max_ctx, KVH, D] (NaN past each end)."""
    gen = torch.Generator().manual_seed(seed)
    num_blocks = sum(blocks_needed(n, block_size) for n in lens) + 5
    key_cache = torch.randn(num_blocks, block_size, num_kv_heads, head_dim, generator=gen).to(dtype)
    value_cache = torch.randn(key_cache.shape, generator=gen).to(dtype)
    tables = scattered_tables(random.Random(seed), num_blocks, lens, block_size)
    width = max(len(t) for t in tables) + 1  # at least one -1 in every row
    padded = torch.tensor([t + [-1] * (width - len(t)) for t in tables], dtype=torch.int32)
    keys = torch.full((len(lens), max(lens), num_kv_heads, head_dim), float("nan"), dtype=torch.float64)
    values = keys.clone()
    for b, n in enumerate(lens):
        k = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(dtype)
        v = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(dtype)
        keys[b, :n], values[b, :n] = k.double(), v.double()
        write_kv(key_cache, value_cache, k, v, slot_mapping(tables[b], 0, n, block_size))
    query = torch.randn(len(lens), num_heads, head_dim, generator=gen).to(dtype)
    return query, key_cache, value_cache, padded, keys, values


def case_error(impl, dtype_name, num_heads, num_kv_heads, head_dim, block_size, lens) -> float:
    """Relative error of `impl` against the float64 contiguous reference on one case."""
    query, kc, vc, tables, keys, values = build(num_heads, num_kv_heads, head_dim, block_size, lens,
                                                DTYPES[dtype_name])
    ref = contiguous_attention_decode(query.double(), keys, values, lens)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl=impl)
    assert out.dtype == query.dtype and out.shape == query.shape
    return rel_err(out, ref)


def sweep_failures(impl, dtype_name, heads, head_dims, block_sizes, lens_for=ragged_lens) -> list[str]:
    """Every combination of the sweep; returns a line per case over tolerance (empty when all pass)."""
    bad = []
    for num_heads, num_kv_heads in heads:
        for head_dim in head_dims:
            for block_size in block_sizes:
                lens = lens_for(block_size)
                err = case_error(impl, dtype_name, num_heads, num_kv_heads, head_dim, block_size, lens)
                if not err < TOL[dtype_name]:
                    bad.append(f"{impl} {dtype_name} heads {num_heads}/{num_kv_heads} head_dim {head_dim} "
                               f"block_size {block_size} lens {lens}: rel err {err:.2e}")
    return bad
