"""`python -m benchmarks engine`: tokens/s of the paged engine against the contiguous twin and, when transformers is
installed, against transformers' own `generate` on the same weights; same requests, greedy, one run.

    python -m benchmarks engine                      # the shipped tiny model
    python -m benchmarks engine --model DIR          # a local Hugging Face Llama / Qwen2 / Qwen3 directory
    python -m benchmarks engine --random-135m        # SmolLM2-135M's shape with random weights (nothing downloaded)

Two kinds of workload, both printed: "same" (every request 128 new tokens, prompts of similar length: a static
batch's best case) and, with transformers installed, the server-like ones of workloads.py ("mixed": different
lengths; "queue": twice as many requests as the batch holds), charged by the tokens actually requested. "pools"
(asked for by name) times the same requests on pools of 256 / 4,096 / 32,768 blocks: a step's cost must not grow
with the pool.

Every column's repetitions are interleaved (paged, contiguous, HF, vLLM, paged, …), and each ratio is reported as
the median and the spread (min–max) of the per-repetition ratios: on a shared machine one repetition can be slow
for reasons of its own, and the spread says how far to trust the median.
"""

from __future__ import annotations

import argparse
import json
import os
import random

import torch

from paged.addressing import blocks_needed
from paged.kernels import default_attn_impl
from paged.config import CacheConfig, ModelConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.admission import prompt_token_ids
from paged.kv_cache import default_device
from .hf import CLOCKS, _sync, hf_available, hf_twin, run_hf, with_ratio
from .vllm_column import format_vllm, open_vllm, spread  # the vLLM column, when vLLM is installed
from .workloads import MIN_NEW, WORKLOADS, bench_workload, format_workloads


# SmolLM2-135M's shape (a LlamaForCausalLM): 134.5 M parameters, embeddings tied. Random weights decode random
# tokens, but every matmul has the real size, so tokens/s is the real model's.
SMOLLM2_135M = ModelConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                           num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                           rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True)


def bench_model(model_dir: str | None = None, random_135m: bool = False, device=None):
    """(model, tokenizer, label) to benchmark: a directory, the random 135M model (byte tokenizer), or the
    shipped model."""
    from paged.model import ByteTokenizer, TinyLlama, load_model

    if random_135m:
        torch.manual_seed(0)
        model = TinyLlama(SMOLLM2_135M).to(device).eval()
        model.arrange_weights()  # .to() moved each parameter on its own: lay them out again (fused q/k/v)
        return model, ByteTokenizer(), "random SmolLM2-135M shape"
    model, tokenizer = load_model(model_dir, device=device)
    return model, tokenizer, model_dir or "shipped model"


def _prompts(batch: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz "
    return ["".join(rng.choices(letters, k=rng.randint(24, 48))) for _ in range(batch)]


# "wall": elapsed time (what a user waits; the only honest clock on a GPU, which runs asynchronously). "cpu": CPU
def run_once(model, tokenizer, layout: str, prompts: list[str], max_tokens: int, block_size: int,
             attn_impl: str | None, clock: str = "wall",
             num_blocks: int | None = None) -> tuple[float, list[list[int]]]:
    """Seconds (of `clock`, see CLOCKS) to generate every prompt to max_tokens (greedy), and the tokens (for a
    parity check). num_blocks: the pool (default: what the prompts need, + 8)."""
    cfg = model.config
    num_blocks = num_blocks or len(prompts) * blocks_needed(64 + max_tokens, block_size) + 8
    engine = LLMEngine(model, tokenizer, CacheConfig(block_size=block_size, num_blocks=num_blocks, seed=0),
                       SchedulerConfig(max_num_batched_tokens=max(2048, 128 * len(prompts)),
                                       max_num_seqs=max(32, len(prompts))),
                       kv_layout=layout, attn_impl=attn_impl, record=False)  # lean traces: nothing here replays a step
    assert len(prompts[0]) + max_tokens < cfg.max_position_embeddings
    device = next(model.parameters()).device
    _sync(device)  # CUDA runs asynchronously: time from an idle device to an idle device
    t0 = CLOCKS[clock]()
    outs = engine.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    _sync(device)
    return CLOCKS[clock]() - t0, [o.token_ids for o in outs]


def bench_engine(batches=(1, 8, 32), max_tokens: int = 128, block_size: int = 16, reps: int = 3,
                 attn_impl: str | None = None, model=None, tokenizer=None,
                 device: str | torch.device | None = None, hf: bool | None = None,
                 clock: str = "wall", vllm=None) -> list[dict]:
    """Paged and contiguous engine tokens/s per batch size (medians of interleaved runs) on `model` (default: the
    shipped one, on `device`: cuda when available), and whether both layouts produced the same tokens.

    hf (default: when transformers is installed) adds transformers' greedy `generate` on the same weights, prompts
    and threads: hf_tok_s, vs_hf (paged engine / HF) and hf_same (sequences whose tokens equal the engine's, of
    batch). vllm: a vllm_llm.VLLMProcess to time in the same rotation (vllm_tok_s, vs_vllm, vllm_same). Every ratio
    (ratio, vs_hf, vs_vllm) is the median of the per-repetition ratios, with its spread in <key>_min / <key>_max.
    clock: "wall" or "cpu" (see CLOCKS). Each row also holds the paged engine's tokens ("tokens") and HF's
    ("hf_tokens"). Raises ValueError for an unknown clock."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
    if model is None:
        model, tokenizer, _ = bench_model(device=torch.device(device) if device else default_device())
    hf_model = hf_twin(model) if (hf_available() if hf is None else hf) else None
    layouts = ("paged", "contiguous") + (("hf",) if hf_model is not None else ()) + (("vllm",) if vllm else ())
    rows = []
    for batch in batches:
        prompts = _prompts(batch)
        token_ids = [prompt_token_ids(p, tokenizer, model.config.vocab_size) for p in prompts]
        times = {layout: [] for layout in layouts}
        tokens = {}
        run_once(model, tokenizer, "paged", prompts[:1], 4, block_size, attn_impl)  # warm-up
        if hf_model is not None:
            run_hf(hf_model, token_ids[:1], 4)
        for _ in range(reps):  # interleave so machine noise hits all alike
            for layout in layouts:
                if layout == "hf":
                    secs, tokens[layout] = run_hf(hf_model, token_ids, max_tokens, clock)
                elif layout == "vllm":
                    secs, tokens[layout] = vllm.generate(token_ids, max_tokens)
                else:
                    secs, tokens[layout] = run_once(model, tokenizer, layout, prompts, max_tokens, block_size,
                                                    attn_impl, clock)
                times[layout].append(secs)
        tps = {layout: batch * max_tokens / sorted(t)[len(t) // 2] for layout, t in times.items()}
        row = dict(batch=batch, new_tokens=max_tokens, paged_tok_s=tps["paged"], contiguous_tok_s=tps["contiguous"],
                   identical=tokens["paged"] == tokens["contiguous"], tokens=tokens["paged"])
        with_ratio(row, "ratio", times["paged"], times["contiguous"])
        if hf_model is not None:
            row.update(hf_tok_s=tps["hf"], hf_tokens=tokens["hf"],
                       hf_same=sum(a == b for a, b in zip(tokens["paged"], tokens["hf"])))
            with_ratio(row, "vs_hf", times["paged"], times["hf"])
        if vllm:
            row.update(vllm_tok_s=tps["vllm"], vllm_same=sum(a == b for a, b in zip(tokens["paged"], tokens["vllm"])))
            with_ratio(row, "vs_vllm", times["paged"], times["vllm"])
        rows.append(row)
    return rows


POOLS = (256, 4096, 32768)


def check_pools(batches, pools, max_tokens: int, block_size: int, tokenizer, vocab_size: int) -> None:
    """Raises ValueError unless the smallest of `pools` holds every batch's requests at their longest (their
    cached tokens, plus the 1% watermark an admission keeps free): the sweep must time steps, not preemptions."""
    for batch in batches:
        ids = [prompt_token_ids(p, tokenizer, vocab_size) for p in _prompts(batch)]
        need = sum(blocks_needed(len(i) + max_tokens - 1, block_size) for i in ids) + int(0.01 * min(pools)) + 1
        if min(pools) < need:
            raise ValueError(f"pools {list(pools)}: batch {batch} at {max_tokens} new tokens needs {need} blocks "
                             "(no preemption)")


def bench_pools(batches=(1, 8, 32), pools=POOLS, max_tokens: int = 64, block_size: int = 16, reps: int = 3,
                attn_impl: str | None = None, model=None, tokenizer=None, clock: str = "wall") -> list[dict]:
    """The paged engine on the same requests with pools of `pools` blocks, the pool sizes alternating within each
    repetition: per (batch, pool) its tok/s (median) and vs_smallest, its tok/s over the smallest pool's (median of
    the per-repetition ratios, spread in vs_smallest_min / _max), and whether its tokens equal the smallest pool's.
    Raises ValueError for a pool too small to hold a batch without preempting."""
    check_pools(batches, pools, max_tokens, block_size, tokenizer, model.config.vocab_size)
    rows = []
    for batch in batches:
        prompts = _prompts(batch)
        run_once(model, tokenizer, "paged", prompts[:1], 4, block_size, attn_impl)  # warm-up
        times: dict[int, list[float]] = {p: [] for p in pools}
        tokens: dict[int, list[list[int]]] = {}
        for rep in range(reps):
            for pool in (pools if rep % 2 == 0 else pools[::-1]):  # alternate which pool runs first
                secs, tokens[pool] = run_once(model, tokenizer, "paged", prompts, max_tokens, block_size, attn_impl,
                                              clock, num_blocks=pool)
                times[pool].append(secs)
        base = pools[0]
        for pool in pools:
            row = dict(batch=batch, num_blocks=pool, new_tokens=max_tokens,
                       paged_tok_s=batch * max_tokens / sorted(times[pool])[reps // 2],
                       identical=tokens[pool] == tokens[base])
            with_ratio(row, "vs_smallest", times[pool], times[base])
            rows.append(row)
    return rows


def format_pools(rows: list[dict]) -> str:
    """The pool sweep as a text table ("vs smallest pool": median (min–max) of per-repetition ratios)."""
    head = f"{'batch':>5} {'blocks':>7} {'paged tok/s':>12} {'vs smallest pool (min–max)':>28} {'same tokens':>12}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['batch']:>5} {r['num_blocks']:>7} {r['paged_tok_s']:>12.0f} "
                     f"{spread(r, 'vs_smallest'):>28} {'✔' if r['identical'] else '✗':>12}")
    return "\n".join(lines)


def format_table(rows: list[dict]) -> str:
    """The rows as a text table; HF columns when the rows have them ("same as HF": sequences equal / batch). Ratios:
    median (min–max) of the per-repetition ratios."""
    with_hf = all("hf_tok_s" in r for r in rows)
    head = (f"{'batch':>5} {'new':>5} {'paged tok/s':>12} {'contig tok/s':>13} {'paged/contig (min–max)':>24} "
            f"{'same tokens':>12}")
    if with_hf:
        head += f" {'HF tok/s':>9} {'paged/HF (min–max)':>22} {'same as HF':>11}"
    lines = [head, "-" * len(head)]
    for r in rows:
        line = (f"{r['batch']:>5} {r['new_tokens']:>5} {r['paged_tok_s']:>12.0f} {r['contiguous_tok_s']:>13.0f} "
                f"{spread(r, 'ratio'):>24} {'✔' if r['identical'] else '✗':>12}")
        if with_hf:
            same = f"{'✔' if r['hf_same'] == r['batch'] else '✗'} {r['hf_same']}/{r['batch']}"
            line += f" {r['hf_tok_s']:>9.0f} {spread(r, 'vs_hf'):>22} {same:>11}"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks engine",
                                description="Paged engine throughput vs its contiguous twin and transformers' generate "
                                            "(greedy): equal requests, then server-like mixed lengths and queues.")
    p.add_argument("--batches", default=None, help="default 1,8,32 (shipped model), 1 (--model / --random-135m)")
    p.add_argument("--max-tokens", type=int, default=None, help="default 128 (shipped model), 64 otherwise")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--model", default=None, help="local Hugging Face Llama / Qwen2 / Qwen3 directory")
    which.add_argument("--random-135m", action="store_true",
                       help="SmolLM2-135M's shape with random weights, built here (nothing is downloaded)")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--impl", default=None, help="decode impl (default: fastest for the device)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: the tiny model's ops are too small to share, and a "
                        "second thread that has to wait for a busy core costs far more than it gives)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--no-hf", action="store_true", help="skip transformers' generate (measured when installed)")
    p.add_argument("--no-vllm", action="store_true", help="skip vLLM's own engine (measured when installed)")
    p.add_argument("--pools", default=",".join(map(str, POOLS)),
                   help="the pool sizes (blocks) of the pools workload, smallest first")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="wall (default) or cpu: CPU seconds of this process, steadier on a busy shared CPU machine")
    p.add_argument("--workloads", default="same,mixed,queue",
                   help="comma list of same (all requests 128 new tokens), mixed, queue (see workloads.py), "
                        "pools (the same requests on each of --pools, 64 new tokens unless --max-tokens)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device here")
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    if args.clock == "cpu" and (args.device == "cuda" or (args.device is None and torch.cuda.is_available())):
        p.error("--clock cpu would miss the GPU's work: time a CUDA run with the wall clock")
    own = args.model is not None or args.random_135m
    device = torch.device(args.device) if args.device else default_device()
    try:
        model, tokenizer, label = bench_model(args.model, args.random_135m, device)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}")
        return 2
    batches = tuple(int(b) for b in (args.batches or ("1" if own else "1,8,32")).split(","))
    max_tokens = args.max_tokens or (64 if own else 128)
    kinds = [w for w in args.workloads.split(",") if w]
    unknown = set(kinds) - {"same", "pools", *WORKLOADS}
    if unknown:
        p.error(f"--workloads: unknown {sorted(unknown)}; choose from same, pools, {', '.join(WORKLOADS)}")
    pools = tuple(sorted(int(n) for n in args.pools.split(",") if n))
    if "pools" in kinds:  # before anything runs
        try:
            check_pools(batches, pools, args.max_tokens or 64, args.block_size, tokenizer, model.config.vocab_size)
        except ValueError as err:
            p.error(str(err))
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    vllm, why_no_vllm = None, "skipped (--no-vllm)" if args.no_vllm else "not run for --random-135m (no directory)"
    vllm_ok = True  # vLLM's column agreed with every sequence, or vLLM is not installed (a failed start: False)
    if "same" in kinds and not args.no_vllm and not args.random_135m:  # vLLM reads the model from its directory
        try:
            vllm, why_no_vllm = open_vllm(args.model, max(batches), args.threads, args.clock)
        except RuntimeError as err:
            why_no_vllm, vllm_ok = str(err), False
    try:
        rows = (bench_engine(batches, max_tokens, args.block_size, args.reps, args.impl, model, tokenizer,
                             hf=False if args.no_hf else None, clock=args.clock, vllm=vllm) if "same" in kinds else [])
    finally:
        if vllm is not None:
            vllm.close()
    pool_rows = (bench_pools(batches, pools, args.max_tokens or 64, args.block_size, args.reps, args.impl, model,
                             tokenizer, args.clock) if "pools" in kinds else [])
    hf_model = None if args.no_hf or not hf_available() else hf_twin(model)
    served = [bench_workload(name, batch, model, tokenizer, hf_model, args.block_size, args.impl, args.reps,
                             args.clock, max_tokens)
              for name in kinds if name in WORKLOADS and hf_model is not None for batch in batches]
    drop = ("tokens", "hf_tokens")
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k not in drop} for r in rows + served + pool_rows],
                         indent=1))
    else:
        impl = args.impl or f"{default_attn_impl(device)} (the {device.type} default)"
        params = sum(p.numel() for p in model.parameters())
        print(f"{label} ({params / 1e6:.1f} M parameters, {next(model.parameters()).dtype}), greedy, block_size "
              f"{args.block_size}, threads {args.threads}, impl {impl}, {args.clock} clock, median of {args.reps} "
              "interleaved runs")
        if rows:
            print("same: every request asks for the same number of new tokens (a static batch's best case)")
            if "hf_tok_s" not in rows[0]:
                print("HF column: " + ("skipped (--no-hf)" if args.no_hf else "transformers is not installed"))
            print(format_table(rows))
            print(format_vllm(rows, vllm.version) if vllm is not None else f"vLLM column: {why_no_vllm}")
        if served:
            print(f"\nmixed: max_tokens {MIN_NEW if max_tokens >= MIN_NEW else 1}…{max_tokens}, prompts of different lengths; queue: 2 x batch such "
                  "requests, at most batch at once. tok/s = tokens requested / time (HF runs each static batch to "
                  "its longest request)")
            print(format_workloads(served))
        elif hf_model is None and set(kinds) & set(WORKLOADS):
            print("mixed / queue workloads: skipped (they compare against transformers' generate)")
        if pool_rows:
            print(f"\npools: the same requests ({pool_rows[0]['new_tokens']} new tokens) on pools of "
                  f"{', '.join(map(str, pools))} blocks, alternating; a step's cost must not grow with the pool")
            print(format_pools(pool_rows))
        if load is not None:
            print(f"load average at the start: {load[0]:.2f} (1 min), {load[1]:.2f} (5 min)")
    ok = (all(r["identical"] and r.get("hf_same", r["batch"]) == r["batch"] == r.get("vllm_same", r["batch"])
              for r in rows)
          and all(r["hf_same"] == r["requests"] for r in served) and all(r["identical"] for r in pool_rows)
          and vllm_ok)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
