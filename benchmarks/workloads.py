"""Server-like workloads for `python -m benchmarks engine`: requests of different lengths, and more requests than
the batch holds, through the paged engine (continuous batching) and through transformers' `generate` (static
batches), same weights, greedy, end-of-text ignored.

    mixed   B requests, max_tokens drawn from 16…128 and prompts of 8…96 characters (fixed seed)
    queue   2·B such requests; the engine runs at most B at once (max_num_seqs B), HF runs them B at a time

`generate` runs each static batch until its longest request is done; a request's tokens past its own max_tokens
are thrown away. So both sides are charged with the tokens actually requested ("useful tokens"), and the engine's
tokens of each request must equal the first max_tokens tokens HF made for it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from paged.addressing import blocks_needed
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.admission import prompt_token_ids
from .hf import CLOCKS, _sync, run_hf, with_ratio

WORKLOADS = {"mixed": 1, "queue": 2}  # name -> requests per batch slot
MIN_NEW, MAX_NEW = 16, 128
PROMPT_CHARS = (8, 96)


@dataclass(frozen=True)
class Request:
    """One request of a workload: its prompt and how many tokens it asks for."""

    prompt: str
    max_tokens: int


def mixed_requests(count: int, seed: int = 0, max_new: int = MAX_NEW) -> list[Request]:
    """`count` requests with prompts of PROMPT_CHARS characters and max_tokens in MIN_NEW…max_new (both drawn with
    `seed`; max_new below MIN_NEW draws from 1…max_new). Raises ValueError for count < 1 or max_new < 1."""
    if count < 1 or max_new < 1:
        raise ValueError(f"count and max_new must be >= 1, got {count} and {max_new}")
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz "
    low = MIN_NEW if max_new >= MIN_NEW else 1
    return [Request("".join(rng.choices(letters, k=rng.randint(*PROMPT_CHARS))), rng.randint(low, max_new))
            for _ in range(count)]


def run_engine(model, tokenizer, requests: list[Request], batch: int, block_size: int, attn_impl: str | None,
               clock: str = "wall") -> tuple[float, list[list[int]]]:
    """Seconds (of `clock`, see hf.CLOCKS) for the paged engine to serve every request, at most `batch`
    at once (the next waiting one is admitted as soon as one finishes), and each request's tokens."""
    longest = max(len(r.prompt) for r in requests) + max(r.max_tokens for r in requests)
    # room for every request that may run at once at its longest: no preemption (the pool's size no longer costs
    # a step anything: the checkpoint journals what a step changes; see bench_pools)
    num_blocks = min(len(requests), batch) * blocks_needed(longest, block_size) + 8
    engine = LLMEngine(model, tokenizer, CacheConfig(block_size=block_size, num_blocks=num_blocks, seed=0),
                       SchedulerConfig(max_num_batched_tokens=max(2048, 128 * batch), max_num_seqs=batch),
                       kv_layout="paged", attn_impl=attn_impl, record=False)  # lean traces: nothing here replays a step
    device = next(model.parameters()).device
    _sync(device)
    t0 = CLOCKS[clock]()
    ids = [engine.add_request(r.prompt, SamplingParams(max_tokens=r.max_tokens, ignore_eos=True))
           for r in requests]
    while engine.has_unfinished():
        engine.step()
    _sync(device)
    return CLOCKS[clock]() - t0, [engine.output(i).token_ids for i in ids]


def run_hf_batches(hf, tokenizer, requests: list[Request], batch: int,
                   clock: str = "wall") -> tuple[float, list[list[int]]]:
    """Seconds for transformers' `generate` to serve the requests `batch` at a time, in order, each static batch
    running to its longest max_tokens; and each request's tokens cut to its own max_tokens."""
    vocab = hf.config.vocab_size
    total, tokens = 0.0, []
    for at in range(0, len(requests), batch):
        group = requests[at:at + batch]
        ids = [prompt_token_ids(r.prompt, tokenizer, vocab) for r in group]
        secs, out = run_hf(hf, ids, max(r.max_tokens for r in group), clock)
        total += secs
        tokens += [row[:r.max_tokens] for r, row in zip(group, out)]
    return total, tokens


def bench_workload(name: str, batch: int, model, tokenizer, hf, block_size: int = 16, attn_impl: str | None = None,
                   reps: int = 3, clock: str = "wall", max_new: int = MAX_NEW) -> dict:
    """One row: useful tokens/s of the paged engine and of HF `generate` (medians of interleaved runs) on workload
    `name` (see WORKLOADS) at batch size `batch`, and how many requests got the same tokens from both.
    Raises ValueError for an unknown workload."""
    if name not in WORKLOADS:
        raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, got {name!r}")
    requests = mixed_requests(WORKLOADS[name] * batch, seed=batch, max_new=max_new)
    useful = sum(r.max_tokens for r in requests)
    groups = [requests[at:at + batch] for at in range(0, len(requests), batch)]
    hf_generated = sum(len(g) * max(r.max_tokens for r in g) for g in groups)  # what generate computes
    times: dict[str, list[float]] = {"paged": [], "hf": []}
    tokens: dict[str, list[list[int]]] = {}
    for _ in range(reps):  # interleaved, so machine noise hits both alike
        secs, tokens["paged"] = run_engine(model, tokenizer, requests, batch, block_size, attn_impl, clock)
        times["paged"].append(secs)
        secs, tokens["hf"] = run_hf_batches(hf, tokenizer, requests, batch, clock)
        times["hf"].append(secs)
    tps = {k: useful / sorted(t)[len(t) // 2] for k, t in times.items()}
    row = dict(workload=name, batch=batch, requests=len(requests), useful_tokens=useful,
               hf_generated=hf_generated, paged_tok_s=tps["paged"], hf_tok_s=tps["hf"],
               hf_same=sum(a == b for a, b in zip(tokens["paged"], tokens["hf"])),
               tokens=tokens["paged"], hf_tokens=tokens["hf"])
    with_ratio(row, "vs_hf", times["paged"], times["hf"])  # median (and spread) of the per-repetition ratios
    return row


def format_workloads(rows: list[dict]) -> str:
    """The workload rows as a text table ("same as HF": requests whose tokens agree / requests)."""
    head = (f"{'workload':>8} {'batch':>5} {'requests':>8} {'useful tok':>10} {'paged tok/s':>12} {'HF tok/s':>9} "
            f"{'paged/HF (min–max)':>22} {'same as HF':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        same = f"{'✔' if r['hf_same'] == r['requests'] else '✗'} {r['hf_same']}/{r['requests']}"
        ratio = f"{r['vs_hf']:.2f}x ({r['vs_hf_min']:.2f}–{r['vs_hf_max']:.2f})"
        lines.append(f"{r['workload']:>8} {r['batch']:>5} {r['requests']:>8} {r['useful_tokens']:>10} "
                     f"{r['paged_tok_s']:>12.0f} {r['hf_tok_s']:>9.0f} {ratio:>22} {same:>11}")
    return "\n".join(lines)
