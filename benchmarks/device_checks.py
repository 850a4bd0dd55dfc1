"""The correctness half of `benchmarks.gpu_check`: every decode impl and the engine, on one device.

- `parity_sweep`: every decode impl that applies on the device, over dtypes, heads, head_dim, block sizes and
  ragged context lengths, against `contiguous_attention_decode` in float64 (the same reference the tests use).
  Each case's pool is shuffled, padded with -1 and full of random garbage outside the sequences' blocks.
- `engine_checks`: the twin engines (paged == contiguous, token for token), the model's plain causal forward with
  no cache at all, a negative control (an injected fault must be seen), and prefix caching on == off.

Needs nothing but torch (and triton for impl="triton"): this runs on machines without the app's packages.
"""

from __future__ import annotations

import os

import torch

from paged.addressing import blocks_needed, pad_block_tables, slot_mapping
from paged.attention import DECODE_IMPLS, contiguous_attention_decode, paged_attention_decode, tolerance
from paged.kernels import default_attn_impl
from paged.checks import DTYPES
from paged.config import CacheConfig, SamplingParams
from paged.engine import LLMEngine
from paged.engine.twins import run_twins
from paged.faults import Fault
from paged.kv_cache import write_kv

PROMPTS = ["1 2 3 4 5 6 7 8", "the quick brown fox jumps over", "abcdefghij", "a",
           "PagedAttention reads its history through a block table."]
PREFIX = "The KV cache lives in fixed-size blocks. "  # shared by several prefix-caching prompts


def _why_not(impl: str, device: torch.device) -> str | None:
    """Why decode impl `impl` does not apply on `device` (None: it does)."""
    from paged.kernels import native_error, triton_available

    if impl == "native":
        return "the C kernel runs on CPU tensors only" if device.type != "cpu" else native_error()
    if impl == "triton":
        if not triton_available():
            return "the triton package is not installed"
        if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            return "on a CPU triton needs TRITON_INTERPRET=1 (set before triton is imported)"
    return None


def impls_for(device: torch.device) -> tuple[list[str], dict[str, str]]:
    """The decode impls (every one registered in paged.kernels.DECODE_IMPLS, in its order) that apply on
    `device`, and {impl: why it is skipped} for the others."""
    from paged import kernels  # noqa: F401  (registers fused, native and triton)

    why = {impl: _why_not(impl, device) for impl in DECODE_IMPLS}
    return [i for i, w in why.items() if w is None], {i: w for i, w in why.items() if w is not None}


def fill_pool(key_cache: torch.Tensor, value_cache: torch.Tensor, tables: list[list[int]], lens: list[int],
              gen: torch.Generator, fill: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random K/V for each sequence b (lens[b] tokens, drawn keys then values from `gen`, in the pool's dtype)
    written through slot_mapping + write_kv at block table tables[b] of the pool [num_blocks, block_size,
    num_kv_heads, head_dim]; returns the same K/V kept contiguous in float64: keys, values [B, max(lens),
    num_kv_heads, head_dim], `fill` past each end. The contiguous copy is the reference every impl is checked on."""
    _, block_size, num_kv_heads, head_dim = key_cache.shape
    keys = torch.full((len(lens), max(lens), num_kv_heads, head_dim), fill, dtype=torch.float64)
    values = keys.clone()
    for b, n in enumerate(lens):
        k = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(key_cache.dtype)
        v = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(key_cache.dtype)
        keys[b, :n], values[b, :n] = k.double(), v.double()
        write_kv(key_cache, value_cache, k, v, slot_mapping(tables[b], 0, n, block_size))
    return keys, values


def ragged_case(num_heads: int, num_kv_heads: int, head_dim: int, block_size: int, lens: list[int],
                dtype: torch.dtype, device: torch.device, seed: int = 0) -> dict:
    """Random query [B, num_heads, head_dim] and K/V written through slot_mapping + write_kv into shuffled blocks
    of a pool whose other blocks hold garbage; block_tables int32 [B, max_blocks + 1], -1 padded; and the same
    K/V kept contiguous in float64, keys/values [B, max(lens), num_kv_heads, head_dim] (zeros past each end)."""
    gen = torch.Generator().manual_seed(seed)
    per_seq = [blocks_needed(n, block_size) for n in lens]
    num_blocks = sum(per_seq) + 3  # spare blocks: garbage that no sequence may read
    key_cache = torch.randn(num_blocks, block_size, num_kv_heads, head_dim, generator=gen).to(dtype)
    value_cache = torch.randn(key_cache.shape, generator=gen).to(dtype)
    order = torch.randperm(num_blocks, generator=gen).tolist()
    tables = [order[sum(per_seq[:b]):sum(per_seq[:b + 1])] for b in range(len(lens))]
    padded = pad_block_tables(tables, max(per_seq) + 1)  # at least one -1 in every row
    keys, values = fill_pool(key_cache, value_cache, tables, lens, gen)
    query = torch.randn(len(lens), num_heads, head_dim, generator=gen).to(dtype)
    return {name: t.to(device) for name, t in dict(query=query, key_cache=key_cache, value_cache=value_cache,
                                                     block_tables=padded, keys=keys, values=values).items()}


def lens_for(block_size: int, longest: int) -> list[int]:
    """Ragged context lengths: one token, exactly one block, one past it, one short of three blocks, `longest`."""
    return [1, block_size, block_size + 1, 3 * block_size - 1, longest]


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref|, in float64."""
    return ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()


SweepCase = tuple[str, int, int, int, int]  # dtype, num_heads, num_kv_heads, head_dim, block_size


def sweep_cases(dtypes: list[str], block_sizes: list[int], heads: list[tuple[int, int]], head_dims: list[int],
                at_block_size: int = 16) -> list[SweepCase]:
    """Two crosses, not one: every dtype x every block size (at heads[0], head_dims[-1]), then every heads x
    head_dim (float32, block size `at_block_size`). Each Triton shape is a separate compilation (about a second on
    a GPU), so the full product would spend minutes compiling what these crosses already cover."""
    first = [(d, *heads[0], head_dims[-1], bs) for d in dtypes for bs in block_sizes]
    second = [("float32", h, kv, hd, at_block_size) for h, kv in heads for hd in head_dims]
    return list(dict.fromkeys(first + second))


def parity_sweep(device: torch.device, impls: list[str], cases: list[SweepCase], longest: int = 97) -> list[dict]:
    """One row per (case, impl): rel_err against the float64 contiguous reference, the dtype's tolerance, ok. An
    impl that raises is a failed row with the error; triton rows for block sizes that are not powers of two are
    left out (the kernel refuses them by design)."""
    rows = []
    for dtype_name, num_heads, num_kv_heads, head_dim, block_size in cases:
        dtype = DTYPES[dtype_name]
        lens = lens_for(block_size, longest)
        data = ragged_case(num_heads, num_kv_heads, head_dim, block_size, lens, dtype, device)
        ref = contiguous_attention_decode(data["query"].double(), data["keys"], data["values"], lens)
        for impl in impls:
            if impl == "triton" and block_size & (block_size - 1):
                continue
            row = dict(impl=impl, dtype=dtype_name, num_heads=num_heads, num_kv_heads=num_kv_heads,
                       head_dim=head_dim, block_size=block_size, lens=lens, tol=tolerance(dtype))
            try:
                out = paged_attention_decode(data["query"], data["key_cache"], data["value_cache"],
                                             data["block_tables"], lens, impl=impl)
                row["rel_err"] = rel_err(out, ref)
                row["ok"] = out.dtype == dtype and out.shape == data["query"].shape and row["rel_err"] < row["tol"]
            except Exception as err:  # noqa: BLE001 — a crash is a failed case, reported, not fatal
                row.update(rel_err=None, ok=False, error=f"{type(err).__name__}: {err}")
            rows.append(row)
    return rows


def _generate_no_cache(model, token_ids: list[int], new_tokens: int) -> list[int]:
    """Greedy continuation by re-running the model's plain causal forward over the whole sequence each step."""
    device = next(model.parameters()).device
    ids = list(token_ids)
    with torch.inference_mode():
        for _ in range(new_tokens):
            ids.append(int(model(torch.tensor([ids], device=device))[0, -1].argmax()))
    return ids[len(token_ids):]


def engine_checks(model, tokenizer, impls: list[str], block_sizes: list[int], new_tokens: int,
                  prefix_block_size: int) -> dict:
    """Twins for every impl at each block size, the no-cache reference, a negative control and prefix caching,
    all with the shipped model on the model's device. Returns a dict of row lists (see gpu_check's JSON)."""
    device = next(model.parameters()).device
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    longest = max(len(tokenizer.encode(p)) for p in PROMPTS) + new_tokens
    default = default_attn_impl(device)

    def cache(block_size: int, **kw) -> CacheConfig:
        return CacheConfig(block_size=block_size, num_blocks=len(PROMPTS) * blocks_needed(longest, block_size) + 8,
                           seed=0, **kw)

    twins, runs = [], {}
    for impl in impls:
        for block_size in block_sizes:
            if impl == "triton" and block_size & (block_size - 1):
                continue
            run = run_twins(model, tokenizer, PROMPTS, params, cache(block_size), attn_impl=impl)
            runs[impl, block_size] = run
            twins.append(dict(impl=impl, block_size=block_size, identical=run.identical, max_logits_diff=run.max_diff,
                              steps=len(run.steps),
                              first_divergence=[run.first_divergence(i) for i in range(len(PROMPTS))]))
    ref_run = runs.get((default, block_sizes[0])) or next(iter(runs.values()))
    no_cache = []
    for prompt, out in zip(PROMPTS, ref_run.paged):
        expected = _generate_no_cache(model, tokenizer.encode(prompt), new_tokens)
        no_cache.append(dict(prompt=prompt, same_tokens=out.token_ids == expected))
    fault_run = run_twins(model, tokenizer, PROMPTS, params, cache(block_sizes[0]), attn_impl=default,
                          fault=Fault.SLOT_OFF_BY_ONE)
    negative = dict(fault=Fault.SLOT_OFF_BY_ONE.value, impl=default, detected=not fault_run.identical,
                    max_logits_diff=fault_run.max_diff)
    return dict(default_impl=default, twins=twins, no_cache=no_cache, negative_control=negative,
                prefix_caching=prefix_caching_check(model, tokenizer, default, prefix_block_size, params))


def prefix_caching_check(model, tokenizer, impl: str, block_size: int, params: SamplingParams) -> dict:
    """Prompts sharing a prefix, run one at a time with prefix caching on, then all together with it off: the
    tokens must be equal, and the cache must have been hit (else the check proves nothing)."""
    prompts = [PREFIX + "alpha", PREFIX + "beta", PREFIX + "alpha", "unrelated", PREFIX]
    longest = max(len(tokenizer.encode(p)) for p in prompts) + params.max_tokens
    num_blocks = len(prompts) * blocks_needed(longest, block_size) + 8

    def engine(caching: bool) -> LLMEngine:
        return LLMEngine(model, tokenizer, CacheConfig(block_size=block_size, num_blocks=num_blocks, seed=0,
                                                       watermark=0.0, enable_prefix_caching=caching), attn_impl=impl)

    on_engine, on, hits = engine(True), [], 0
    for p in prompts:  # one at a time: later prompts find earlier ones' blocks in the cache
        rid = on_engine.add_request(p, params)
        on_engine.step()  # its prefill: the hits are known while it holds its blocks (freeing drops them)
        hits = max(hits, sum(on_engine.block_manager.last_hits[rid]))
        while on_engine.has_unfinished():
            on_engine.step()
        on.append(on_engine.output(rid).token_ids)
    off = [o.token_ids for o in engine(False).generate(prompts, params)]
    return dict(impl=impl, block_size=block_size, same_tokens=on == off, blocks_hit=hits)
