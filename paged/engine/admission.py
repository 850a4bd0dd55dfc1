"""Admission: the checks a request passes before the engine queues it.

A request that is accepted can run: its token ids are valid for the model, its sampling parameters
are sane, and it fits in the model's positions, the pool and the scheduler's budgets even when it
runs alone. Everything else is refused here with a ValueError naming the value and the rule, so a
bad request never reaches a step (where it would fail in the middle of a batch). A request too big
for this engine raises `AdmissionError`, a ValueError that also carries a code and the numbers its
fix needs, so a page can say "raise num_blocks to 12" without restating the rules.
"""

from __future__ import annotations

import torch

from ..addressing import blocks_needed, logical_address
from ..block_manager import BlockManager
from ..checks import as_token_ids
from ..config import MAX_NUM_BLOCKS, CacheConfig, ModelConfig, SamplingParams, SchedulerConfig
from ..kv_cache import KVCachePool


def prompt_token_ids(prompt, tokenizer, vocab_size: int) -> list[int]:
    """The prompt as a list of token ids: text is encoded with `tokenizer`, a list of ints kept.

    Every id must be an int (not a bool or a float) in [0, vocab_size).
    Raises: ValueError if the prompt is empty, not text or ints, or holds a bad id."""
    if isinstance(prompt, str):
        if not prompt:
            raise ValueError("prompt is empty: type some text")
        try:
            token_ids = tokenizer.encode(prompt)
        except (ValueError, TypeError) as err:  # e.g. lone surrogates that UTF-8 cannot encode
            raise ValueError(f"prompt could not be tokenized: {err}") from None
        return as_token_ids(token_ids, "the tokenizer's ids", vocab_size)
    if prompt is None or isinstance(prompt, (bytes, bytearray, dict, set)):
        raise ValueError(f"prompt must be text or a list of token ids, got {type(prompt).__name__}")
    token_ids = as_token_ids(prompt, "prompt token ids", vocab_size)
    if not token_ids:
        raise ValueError("prompt is empty: give at least one token")
    return token_ids


def check_params(params) -> SamplingParams:
    """`params`, or the default SamplingParams for None.

    Raises: ValueError if params is neither None nor a SamplingParams."""
    if params is None:
        return SamplingParams()
    if not isinstance(params, SamplingParams):
        raise ValueError(f"params must be a SamplingParams, got {type(params).__name__}")
    return params


class AdmissionError(ValueError):
    """A request refused by `check_fits`: `code` names the limit, `values` the numbers a fix needs.

    The message is the English sentence a plain ValueError would carry."""

    def __init__(self, code: str, message: str, **values) -> None:
        super().__init__(message)
        self.code, self.values = code, values


def smallest_pool(need: int, num_blocks: int, watermark: float) -> int:
    """The smallest pool size (at least `num_blocks`) whose usable blocks hold `need` blocks.

    Usable blocks are num_blocks - int(watermark * num_blocks), as the block manager keeps them."""
    # usable(size) never decreases as size grows
    usable = lambda size: size - int(watermark * size)  # noqa: E731
    lo, hi = num_blocks, max(num_blocks, 1)
    # doubling, then bisection: O(log) steps even for a watermark near 1
    while usable(hi) < need and hi < 2**80:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if usable(mid) >= need else (mid + 1, hi)
    return lo


def check_fits(num_prompt_tokens: int, params: SamplingParams, model_config: ModelConfig,
               bm: BlockManager, scheduler_config: SchedulerConfig) -> None:
    """Check that a request could run alone; the checks in order, as code: the values it carries.

    positions     longer than the model's positions:
                  tokens, prompt, max_positions, fit (largest max_tokens)
    pool          bigger than the whole pool less its watermark:
                  tokens, need, usable, min_blocks (smallest pool that holds it),
                  fit_tokens (what the pool holds)
    samples       parallel samples that could never run together:
                  n, n_fit (largest n that could), max_num_seqs
    batch_tokens  too long to recompute in one step after a preemption (no chunked prefill):
                  tokens, budget

    Raises: AdmissionError (a ValueError) for the first check the request fails.
    """
    total = num_prompt_tokens + params.max_tokens
    max_positions = model_config.max_position_embeddings
    if total > max_positions:
        raise AdmissionError(
            "positions", f"prompt ({num_prompt_tokens} tokens) + max_tokens ({params.max_tokens}) "
                         f"= {total} exceeds max_position_embeddings ({max_positions}); shorten "
                         "the prompt or lower max_tokens",
            tokens=total, prompt=num_prompt_tokens, max_positions=max_positions,
            fit=max(1, max_positions - num_prompt_tokens))
    need = blocks_needed(total, bm.block_size)
    usable = bm.num_blocks - bm.watermark_blocks
    if need > usable:
        raise AdmissionError(
            "pool", f"this request could never fit even in an empty pool: {total} tokens need "
                    f"{need} blocks of {bm.block_size}, the pool has {bm.num_blocks} (watermark "
                    f"{bm.watermark_blocks}); raise num_blocks or lower max_tokens",
            tokens=total, need=need, usable=usable,
            min_blocks=smallest_pool(need, bm.num_blocks, bm.watermark),
            fit_tokens=usable * bm.block_size)
    if params.n > 1:
        # the prompt's full blocks every sample shares, and the tokens of its last, partial one each
        # sample copies
        shared, partial = logical_address(num_prompt_tokens, bm.block_size)
        own = blocks_needed(partial + params.max_tokens, bm.block_size)
        # The largest n that fits, by arithmetic (n may be astronomically large: never scan up to
        # it).
        n_fit = max(1, min(params.n - 1, scheduler_config.max_num_seqs, (usable - shared) // own))
        if params.n > scheduler_config.max_num_seqs or shared + params.n * own > usable:
            raise AdmissionError(
                "samples", f"n={params.n} parallel samples could never run together: they need up "
                           f"to {shared + params.n * own} blocks (pool {bm.num_blocks}) and "
                           f"{params.n} sequence slots (max_num_seqs "
                           f"{scheduler_config.max_num_seqs}); lower n or max_tokens",
                n=params.n, n_fit=n_fit,
                max_num_seqs=scheduler_config.max_num_seqs, need=shared + params.n * own,
                usable=usable)
    budget = scheduler_config.max_num_batched_tokens
    if total > budget and not scheduler_config.enable_chunked_prefill:
        raise AdmissionError("batch_tokens", f"{total} tokens exceed max_num_batched_tokens "
                                             f"({budget}): a preempted request could not be "
                                             "recomputed in one step",
                             tokens=total, budget=budget)


def free_memory_bytes(device: torch.device) -> int | None:
    """Bytes still allocatable on `device` (GPU free memory, else the host's); None if unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    # the one host-memory reader (weights are checked with it too)
    from ..model.io import available_memory_bytes

    return available_memory_bytes()


def check_pool_memory(model_config: ModelConfig, num_blocks: int, block_size: int,
                      dtype: torch.dtype, device: torch.device,
                      available: int | None = None) -> int:
    """The KV pool's bytes: 2 (K and V) x layers x num_blocks x block_size x kv heads x head_dim x
    dtype size. Call it before allocating the pool.

    `available` defaults to what `device` has free now (no check when that is unknown).
    Raises: ValueError naming every factor if the pool needs more than `available`."""
    per_block = KVCachePool.bytes_per_block(model_config.num_hidden_layers, block_size,
                                            model_config.num_key_value_heads, model_config.head_dim,
                                            dtype)
    need = num_blocks * per_block
    available = free_memory_bytes(device) if available is None else available
    if available is not None and need > available:
        itemsize = torch.empty((), dtype=dtype).element_size()
        raise ValueError(
            f"the KV pool needs {need:,} bytes ({need / 2**30:.2f} GiB) = 2 x "
            f"{model_config.num_hidden_layers} layers x {num_blocks} blocks x block_size "
            f"{block_size} x {model_config.num_key_value_heads} kv heads x head_dim "
            f"{model_config.head_dim} x {itemsize} bytes ({str(dtype).removeprefix('torch.')}), "
            f"but only {available:,} bytes ({available / 2**30:.2f} GiB) are free on "
            f"{device.type}; lower num_blocks or block_size")
    return need


def pool_num_blocks(model_config: ModelConfig, cache_config: CacheConfig, dtype: torch.dtype,
                    device: torch.device) -> int:
    """The engine's pool size in blocks: cache_config.num_blocks, or what memory_budget_bytes holds.

    At least 1 block. Call it before allocating the pool.
    Raises: ValueError if the budget makes over MAX_NUM_BLOCKS or the pool outgrows free memory."""
    num_blocks = cache_config.num_blocks
    if num_blocks is None:
        per_block = KVCachePool.bytes_per_block(model_config.num_hidden_layers,
                                                cache_config.block_size,
                                                model_config.num_key_value_heads,
                                                model_config.head_dim, dtype)
        num_blocks = max(1, cache_config.memory_budget_bytes // per_block)
        if num_blocks > MAX_NUM_BLOCKS:
            raise ValueError(f"memory_budget_bytes {cache_config.memory_budget_bytes} makes "
                             f"{num_blocks} blocks of {per_block} bytes, more than MAX_NUM_BLOCKS "
                             f"({MAX_NUM_BLOCKS}); lower the budget or raise block_size")
    check_pool_memory(model_config, num_blocks, cache_config.block_size, dtype, device)
    return num_blocks
