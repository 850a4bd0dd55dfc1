"""`python -m paged.bench engine`: tokens/s of the paged engine against the contiguous twin, same requests, one run."""

from __future__ import annotations

import argparse
import json
import random
import time

import torch

from ..config import CacheConfig, SamplingParams, SchedulerConfig
from ..kv_cache import default_device
from .engine import LLMEngine, default_attn_impl


def _prompts(batch: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz "
    return ["".join(rng.choices(letters, k=rng.randint(24, 48))) for _ in range(batch)]


def run_once(model, tokenizer, layout: str, prompts: list[str], max_tokens: int, block_size: int,
             attn_impl: str | None) -> tuple[float, list[list[int]]]:
    """Seconds to generate every prompt to max_tokens (greedy), and the tokens (for a parity check)."""
    cfg = model.config
    num_blocks = len(prompts) * (-(-(64 + max_tokens) // block_size)) + 8
    engine = LLMEngine(model, tokenizer, CacheConfig(block_size=block_size, num_blocks=num_blocks, seed=0),
                       SchedulerConfig(max_num_batched_tokens=max(2048, 128 * len(prompts)),
                                       max_num_seqs=max(32, len(prompts))),
                       kv_layout=layout, attn_impl=attn_impl)
    assert len(prompts[0]) + max_tokens < cfg.max_position_embeddings
    device = next(model.parameters()).device
    _sync(device)  # CUDA runs asynchronously: time from an idle device to an idle device
    t0 = time.perf_counter()
    outs = engine.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    _sync(device)
    return time.perf_counter() - t0, [o.token_ids for o in outs]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_engine(batches=(1, 8, 32), max_tokens: int = 128, block_size: int = 16, reps: int = 3,
                 attn_impl: str | None = None, device: str | torch.device | None = None) -> list[dict]:
    """Paged and contiguous engine tokens/s per batch size (medians of interleaved runs) on `device` (default:
    cuda when available), and whether both layouts produced the same tokens."""
    from ..model import load_model

    model, tokenizer = load_model(device=torch.device(device) if device else default_device())
    rows = []
    for batch in batches:
        prompts = _prompts(batch)
        times = {"paged": [], "contiguous": []}
        tokens = {}
        run_once(model, tokenizer, "paged", prompts[:1], 4, block_size, attn_impl)  # warm-up
        for _ in range(reps):  # interleave layouts so machine noise hits both alike
            for layout in ("paged", "contiguous"):
                secs, tokens[layout] = run_once(model, tokenizer, layout, prompts, max_tokens, block_size, attn_impl)
                times[layout].append(secs)
        n = batch * max_tokens
        paged_tps = n / sorted(times["paged"])[len(times["paged"]) // 2]
        contig_tps = n / sorted(times["contiguous"])[len(times["contiguous"]) // 2]
        rows.append(dict(batch=batch, new_tokens=max_tokens, paged_tok_s=paged_tps, contiguous_tok_s=contig_tps,
                         ratio=paged_tps / contig_tps, identical=tokens["paged"] == tokens["contiguous"]))
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'batch':>5} {'new':>5} {'paged tok/s':>12} {'contig tok/s':>13} {'paged/contig':>13} {'same tokens':>12}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['batch']:>5} {r['new_tokens']:>5} {r['paged_tok_s']:>12.0f} {r['contiguous_tok_s']:>13.0f} "
                     f"{r['ratio']:>12.2f}x {'✔' if r['identical'] else '✗':>12}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m paged.bench engine",
                                description="Paged vs contiguous engine throughput (greedy, same requests).")
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--impl", default=None, help="decode impl (default: fastest for the device)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: the tiny model's ops are too small to share, and a "
                        "second thread that has to wait for a busy core costs far more than it gives)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device here")
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    rows = bench_engine(tuple(int(b) for b in args.batches.split(",")), args.max_tokens, args.block_size, args.reps,
                        args.impl, args.device)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        device = torch.device(args.device) if args.device else default_device()
        impl = args.impl or f"{default_attn_impl(device)} (the {device.type} default)"
        print(f"shipped model, greedy, block_size {args.block_size}, threads {args.threads}, impl {impl}, median of "
              f"{args.reps} interleaved runs")
        print(format_table(rows))
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
