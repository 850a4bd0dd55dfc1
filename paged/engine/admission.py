"""Admission: the checks a request passes before the engine queues it.

A request that is accepted can run: its token ids are valid for the model, its sampling parameters are sane, and it
fits in the model's positions, the pool and the scheduler's budgets even when it runs alone. Everything else is
refused here with a ValueError naming the value and the rule, so a bad request never reaches a step (where it would
fail in the middle of a batch).
"""

from __future__ import annotations

import torch

from ..addressing import blocks_needed
from ..block_manager import BlockManager
from ..checks import as_token_ids
from ..config import ModelConfig, SamplingParams, SchedulerConfig
from ..kv_cache import KVCachePool


def prompt_token_ids(prompt, tokenizer, vocab_size: int) -> list[int]:
    """The prompt as token ids: a non-empty str is encoded with `tokenizer`; a list / tuple (or 1-D array) of ints
    is taken as is. Every id must be an int (not a bool or a float) in [0, vocab_size). Raises ValueError."""
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
    """`params`, or the default SamplingParams for None; anything else raises ValueError."""
    if params is None:
        return SamplingParams()
    if not isinstance(params, SamplingParams):
        raise ValueError(f"params must be a SamplingParams, got {type(params).__name__}")
    return params


def check_fits(num_prompt_tokens: int, params: SamplingParams, model_config: ModelConfig, bm: BlockManager,
               scheduler_config: SchedulerConfig) -> None:
    """Raise ValueError for a request that could never run: longer than the model's positions, bigger than the whole
    pool (less its watermark), parallel samples that could never run together, or too long to be recomputed in
    one step after a preemption."""
    total = num_prompt_tokens + params.max_tokens
    if total > model_config.max_position_embeddings:
        raise ValueError(f"prompt ({num_prompt_tokens} tokens) + max_tokens ({params.max_tokens}) = {total} exceeds "
                         f"max_position_embeddings ({model_config.max_position_embeddings}); shorten the prompt or "
                         "lower max_tokens")
    need = blocks_needed(total, bm.block_size)
    if need > bm.num_blocks - bm.watermark_blocks:
        raise ValueError(f"this request could never fit even in an empty pool: {total} tokens need {need} "
                         f"blocks of {bm.block_size}, the pool has {bm.num_blocks} (watermark "
                         f"{bm.watermark_blocks}); raise num_blocks or lower max_tokens")
    if params.n > 1:
        shared = num_prompt_tokens // bm.block_size  # full prompt blocks every sample shares
        worst = shared + params.n * blocks_needed(num_prompt_tokens % bm.block_size + params.max_tokens,
                                                  bm.block_size)
        if params.n > scheduler_config.max_num_seqs or worst > bm.num_blocks - bm.watermark_blocks:
            raise ValueError(f"n={params.n} parallel samples could never run together: they need up to {worst} "
                             f"blocks (pool {bm.num_blocks}) and {params.n} sequence slots (max_num_seqs "
                             f"{scheduler_config.max_num_seqs}); lower n or max_tokens")
    if total > scheduler_config.max_num_batched_tokens and not scheduler_config.enable_chunked_prefill:
        raise ValueError(f"{total} tokens exceed max_num_batched_tokens ({scheduler_config.max_num_batched_tokens}): "
                         "a preempted request could not be recomputed in one step")


def free_memory_bytes(device: torch.device) -> int | None:
    """Bytes still allocatable on `device`: the GPU's free memory, else the host's (paged.model.io); None if
    unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    from ..model.io import available_memory_bytes  # the one host-memory reader (weights are checked with it too)

    return available_memory_bytes()


def check_pool_memory(model_config: ModelConfig, num_blocks: int, block_size: int, dtype: torch.dtype,
                      device: torch.device, available: int | None = None) -> int:
    """The KV pool's bytes, 2 (K and V) x num_hidden_layers x num_blocks x block_size x num_key_value_heads x
    head_dim x dtype size; raises ValueError naming every factor when they exceed `available` (default: what
    `device` has free now; no check when that is unknown). Call it before allocating the pool."""
    per_block = KVCachePool.bytes_per_block(model_config.num_hidden_layers, block_size,
                                            model_config.num_key_value_heads, model_config.head_dim, dtype)
    need = num_blocks * per_block
    available = free_memory_bytes(device) if available is None else available
    if available is not None and need > available:
        itemsize = torch.empty((), dtype=dtype).element_size()
        raise ValueError(
            f"the KV pool needs {need:,} bytes ({need / 2**30:.2f} GiB) = 2 x {model_config.num_hidden_layers} layers "
            f"x {num_blocks} blocks x block_size {block_size} x {model_config.num_key_value_heads} kv heads x "
            f"head_dim {model_config.head_dim} x {itemsize} bytes ({str(dtype).removeprefix('torch.')}), but only "
            f"{available:,} bytes ({available / 2**30:.2f} GiB) are free on {device.type}; lower num_blocks or "
            "block_size")
    return need
