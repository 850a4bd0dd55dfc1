"""`python -m benchmarks swap`: what preempting one sequence costs, by swap and by recompute, per block size.

The paper's Fig. 19 (§4.5, on a GPU): swapping a sequence out and back moves its K/V over PCIe block by block, so
small blocks pay for many small copies; recomputing it runs its prefill again, which does not depend on the block
size. Here, for one sequence of `context_len` tokens whose blocks are scattered through the pool:

- swap: copy every block to a host swap pool and back (paged/chapters/swap.py's copy_blocks_between, one batched copy
  per direction), and the same copies made one block and one layer at a time, as vLLM v0's `swap_blocks` issues them;
- recompute: the engine's prefill step of all `context_len` tokens (what a recomputed sequence runs when it comes
  back), on the same model and block size.

Both pools are host memory on this machine, so "swap" is a copy between two host pools, not a PCIe transfer: the
numbers say what these copies cost here, the paper's GPU numbers are the reference (docs/swap.md). Times are the
best of `repeats`; compare the ratios of one run, never absolute times across machines.
"""

from __future__ import annotations

import argparse
import json
import sys
import random
import time

import torch

from paged.addressing import blocks_needed
from paged.config import CacheConfig, SamplingParams
from paged.kv_cache import KVCachePool
from paged.chapters.swap import copy_blocks_between
from .hf import _sync

BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _best(fn, repeats: int, device: torch.device) -> float:
    """Best wall time of fn() over `repeats` runs, in ms (a GPU's queue drained before and after each)."""
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def host_zeros(device: torch.device):
    """The swap pool's allocator: pinned host memory beside a GPU pool (as vLLM v0's swap space: copies to and from
    it can run at PCIe speed), plain torch.zeros beside a CPU one."""
    if device.type != "cuda":
        return torch.zeros
    return lambda shape, dtype, device: torch.zeros(shape, dtype=dtype, device=device).pin_memory()


def _copy_per_block(src: KVCachePool, dst: KVCachePool, pairs: list[tuple[int, int]]) -> None:
    """One copy per block, layer, K and V: the way vLLM v0's swap_blocks issues them (a cudaMemcpyAsync each)."""
    for a, b in pairs:
        for layer in range(src.num_layers):
            dst.key_cache[layer, b].copy_(src.key_cache[layer, a])
            dst.value_cache[layer, b].copy_(src.value_cache[layer, a])


def measure_block_size(model, block_size: int, context_len: int = 512, repeats: int = 3, seed: int = 0) -> dict:
    """One row: bytes and times of swapping a context_len-token sequence out and back in, and of recomputing it.
    Raises ValueError for a context_len the model cannot hold or sizes that are not integers >= 1."""
    from paged.engine import LLMEngine

    cfg = model.config
    if not 1 <= context_len < cfg.max_position_embeddings:
        raise ValueError(f"context_len must be in [1, {cfg.max_position_embeddings - 1}], got {context_len!r}")
    num = blocks_needed(context_len, block_size)
    param = next(model.parameters())
    shape = (cfg.num_hidden_layers, 2 * num, block_size, cfg.num_key_value_heads, cfg.head_dim)
    pool = KVCachePool(*shape, dtype=param.dtype, device=param.device)
    swap = KVCachePool(shape[0], num, *shape[2:], dtype=param.dtype, device="cpu", zeros=host_zeros(param.device))
    pool.key_cache.normal_(), pool.value_cache.normal_()
    rng = random.Random(seed)
    table = rng.sample(range(2 * num), num)  # scattered through the pool, as after some serving
    out_pairs = list(zip(table, range(num)))
    back_pairs = list(zip(range(num), rng.sample(range(2 * num), num)))
    nbytes = [0]

    def swap_batched():
        nbytes[0] = copy_blocks_between(pool, swap, out_pairs) + copy_blocks_between(swap, pool, back_pairs)

    def swap_per_block():
        _copy_per_block(pool, swap, out_pairs)
        _copy_per_block(swap, pool, back_pairs)

    pool_blocks = blocks_needed(context_len + 2, block_size)  # the request (and the 2 tokens it may sample) alone
    engine = LLMEngine(model, _Tok(), CacheConfig(block_size=block_size, num_blocks=pool_blocks, watermark=0.0),
                       attn_impl="gather", record=False)
    prompt = [rng.randrange(min(cfg.vocab_size, 256)) for _ in range(context_len)]

    def recompute():
        rid = engine.add_request(prompt, SamplingParams(max_tokens=2, ignore_eos=True))
        engine.step()  # the prefill of every token: what a recomputed sequence runs again
        engine.abort(rid)

    batched = _best(swap_batched, repeats, param.device)
    per_block = _best(swap_per_block, repeats, param.device)
    recompute_ms = _best(recompute, repeats, param.device)
    return dict(block_size=block_size, blocks=num, swap_bytes=nbytes[0], swap_ms=batched, swap_per_block_ms=per_block,
                recompute_tokens=context_len, recompute_ms=recompute_ms, recompute_over_swap=recompute_ms / batched,
                recompute_over_swap_per_block=recompute_ms / per_block)


class _Tok:
    """The engine only needs eos ids and decode; the prompts here are token ids."""

    eos_token_id = None
    eos_token_ids = ()

    @staticmethod
    def decode(ids) -> str:
        return ""


def measure(model, block_sizes=BLOCK_SIZES, context_len: int = 512, repeats: int = 3) -> list[dict]:
    """measure_block_size for each block size, in one run (compare the ratios of one run)."""
    return [measure_block_size(model, bs, context_len, repeats) for bs in block_sizes]


def format_rows(rows: list[dict]) -> str:
    head = (f"{'block':>5} {'blocks':>6} {'swap MiB':>9} {'swap ms':>8} {'per-block ms':>12} {'recompute tok':>13} "
            f"{'recompute ms':>12} {'rec/swap':>8} {'rec/per-block':>13}")
    lines = [head]
    for r in rows:
        lines.append(f"{r['block_size']:>5} {r['blocks']:>6} {r['swap_bytes'] / 2**20:>9.2f} {r['swap_ms']:>8.3f} "
                     f"{r['swap_per_block_ms']:>12.3f} {r['recompute_tokens']:>13} {r['recompute_ms']:>12.2f} "
                     f"{r['recompute_over_swap']:>8.1f} {r['recompute_over_swap_per_block']:>13.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks swap", description=__doc__.split("\n")[0])
    p.add_argument("--context-len", type=int, default=512, help="tokens of the preempted sequence")
    p.add_argument("--block-sizes", default=",".join(map(str, BLOCK_SIZES)))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--model", default=None, help="a local Hugging Face checkpoint directory (default: shipped)")
    p.add_argument("--random-135m", action="store_true", help="SmolLM2-135M's shape, random weights")
    p.add_argument("--device", default="cpu", help="the pool's device (cuda: the swap crosses PCIe, as in the paper)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from .engine import bench_model

    try:
        sizes = [int(s) for s in args.block_sizes.split(",") if s.strip()]
        if not sizes or min(sizes) < 1 or args.repeats < 1 or args.threads < 1:
            raise ValueError("block sizes, --repeats and --threads must be integers >= 1")
        torch.set_num_threads(args.threads)
        device = torch.device(args.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"--device {args.device}: this torch sees no CUDA GPU")
        torch.manual_seed(0)
        model, _, label = bench_model(args.model, args.random_135m, device)
        rows = measure(model, sizes, args.context_len, args.repeats)
    except (ValueError, RuntimeError) as err:  # RuntimeError: e.g. --device cuda without a GPU
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dict(model=label, context_len=args.context_len, rows=rows), indent=1))
    else:
        print(f"{label}, one sequence of {args.context_len} tokens, best of {args.repeats}, {args.threads} thread(s); "
              "swap = a copy between two host pools (out + back in)")
        print(format_rows(rows))
    return 0


