"""The engine's parts for a sliding window: what LLMEngine builds when model.config.sliding_window.

W below is the window.

- WindowBlockManager (paged/engine/window_blocks.py) holds the blocks; after every step `slide`
  frees, for each running sequence, the blocks wholly before the window of its next token
  (StepTrace.window_freed), so a decoding sequence never holds more than
  max_blocks_held(W, block_size) = ceil(W / block_size) + 1 blocks between steps.
- WindowRunner reads K/V through chapters/window.py: prefill, chunked prefill and decode alike read
  only the tokens each query's window covers (never a hole). Its decode impls: "gather" (the batch
  at once, the default) and "loop" (the teaching loop); the other kernels have no window and are
  refused rather than run wrong.
- The contiguous twin keeps every token and masks with the window (window_attention): the reference.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from ..block_manager import BlockManager
from ..checks import as_int
from ..kv_cache import ContiguousKVCache, KVCachePool, write_kv
from ..chapters.window import paged_window_decode, paged_window_prefill, window_attention
from ..batch import BatchInput
from .window_blocks import WindowBlockManager
from .runner import ModelRunner, prepare_inputs

WINDOW_IMPLS = ("gather", "loop")  # decode impls that know the window


def block_manager_for(model_config, num_blocks: int, block_size: int, watermark: float,
                      seed: int | None,
                      enable_prefix_caching: bool = False) -> BlockManager:
    """A WindowBlockManager when model_config.sliding_window is set, else the plain BlockManager."""
    window = getattr(model_config, "sliding_window", None)
    if window is None:
        return BlockManager(num_blocks, block_size, watermark, seed,
                            enable_prefix_caching=enable_prefix_caching)
    return WindowBlockManager(num_blocks, block_size, window, watermark, seed,
                              enable_prefix_caching)


def runner_for(model: torch.nn.Module, *args) -> ModelRunner:
    """ModelRunner(model, *args), or WindowRunner when the model has a sliding window."""
    return (WindowRunner if getattr(model.config, "sliding_window", None)
            else ModelRunner)(model, *args)


def slide(block_manager: BlockManager, seqs) -> dict[int, list[int]]:
    """After a step, free the blocks the window left behind: seq_id -> freed ({} without one)."""
    return block_manager.slide(seqs) if isinstance(block_manager, WindowBlockManager) else {}


def held_blocks(trace) -> dict[int, int]:
    """seq id -> the blocks its table holds after a recorded step, holes not counted.

    What each running sequence holds until the next step (StepTrace.block_tables_after)."""
    return {sid: sum(b >= 0 for b in table) for sid, table in trace.block_tables_after.items()}


def with_window(model: torch.nn.Module, window: int | None) -> torch.nn.Module:
    """A shallow copy of `model` (the same weights) whose config has sliding_window = window.

    A shared, cached model is never changed. window None: full attention.
    Raises: ValueError for a window < 1."""
    window = None if window is None else as_int(window, "sliding_window", 1)
    twin = copy.copy(model)
    twin.config = replace(model.config, sliding_window=window)
    return twin


class WindowPagedBackend:
    """PagedBackend with a window: write the step's K/V, then read only each sequence's window."""

    def __init__(self, pool: KVCachePool, batch: BatchInput, window: int, impl: str) -> None:
        self.pool, self.batch, self.window, self.impl = pool, batch, window, impl
        self.tables, self.lens = batch.block_tables.tolist(), batch.context_lens.tolist()

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor,
                 v: torch.Tensor) -> torch.Tensor:
        key_cache, value_cache = self.pool.layer(layer)
        write_kv(key_cache, value_cache, k, v, self.batch.slot_mapping, validate=False)
        if self.impl == "gather" and not self.batch.is_prefill:
            return paged_window_decode(q, key_cache, value_cache, self.batch.block_tables,
                                       self.batch.context_lens,
                                       self.window)
        return paged_window_prefill(q, key_cache, value_cache, self.tables, self.lens,
                                    self.batch.query_lens,
                                    self.window, impl=self.impl)


class WindowContiguousBackend:
    """The reference twin with a window: each ContiguousKVCache keeps every token; a mask reads."""

    def __init__(self, caches: list[ContiguousKVCache], batch: BatchInput, window: int) -> None:
        self.caches, self.batch, self.window = caches, batch, window

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor,
                 v: torch.Tensor) -> torch.Tensor:
        out = []
        for cache, start, n in zip(self.caches, self.batch.starts, self.batch.query_lens):
            sl = slice(start, start + n)
            keys, values = cache.update(layer, self.batch.positions[sl], k[sl], v[sl])
            out.append(window_attention(q[sl], keys, values, self.window))
        return torch.cat(out)


class WindowRunner(ModelRunner):
    """ModelRunner for a model with config.sliding_window: the window's backends, no fault.

    The window's break-it is WindowBlockManager(free_early) instead of a fault.
    Raises: ValueError for an impl other than "gather" or "loop", or for a fault."""

    def __init__(self, model: torch.nn.Module, num_blocks: int, block_size: int,
                 kv_layout: str = "paged",
                 attn_impl: str = "gather", fault=None) -> None:
        if attn_impl not in WINDOW_IMPLS:
            raise ValueError(f"attn_impl {attn_impl!r} has no sliding window; with sliding_window "
                             f"set choose one of {list(WINDOW_IMPLS)} (paged/chapters/window.py)")
        if fault is not None:
            raise ValueError("faults are not injected with a sliding window (its own break-it: "
                             "free_early)")
        super().__init__(model, num_blocks, block_size, kv_layout, attn_impl, None)
        self.window = model.config.sliding_window

    def prepare(self, seqs, is_prefill: bool, num_tokens: list[int] | None = None) -> BatchInput:
        """The step's inputs (runner.prepare_inputs), tables not checked as a whole.

        The holes at a table's front are never read; the window's reads refuse a hole inside a
        window themselves."""
        return prepare_inputs(seqs, self.block_size, is_prefill, self.device,
                              paged=self.pool is not None,
                              num_tokens=num_tokens)

    @torch.inference_mode()
    def run(self, seqs, batch: BatchInput) -> torch.Tensor:
        """ModelRunner.run with the window's backends: logits [B, vocab] of each last fed token."""
        if self.pool is not None:
            backend = WindowPagedBackend(self.pool, batch, self.window, self.attn_impl)
        else:
            backend = WindowContiguousBackend([self._contiguous_cache(s) for s in seqs], batch,
                                              self.window)
        last = None
        if batch.is_prefill:
            last = torch.tensor([s + n - 1 for s, n in zip(batch.starts, batch.query_lens)],
                                device=self.device)
        return self.model(batch.input_ids, batch.positions, backend=backend, rows=last).float()
