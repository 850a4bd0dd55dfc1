"""`window_engine`: an LLMEngine over a model with a sliding window (pages, lessons, tests).

The engine itself builds the window's parts when model.config.sliding_window is set
(paged/engine/windowing.py)."""

from __future__ import annotations

import torch

from .engine import LLMEngine
from .windowing import with_window


def window_engine(model: torch.nn.Module, tokenizer, window: int | None, cache_config=None,
                  scheduler_config=None,
                  kv_layout: str = "paged", free_early: bool = False) -> LLMEngine:
    """An LLMEngine over `model` with sliding window `window` (the shared model is left as it is).

    free_early=True acts out page 11's break-it: the block manager frees the block each window
    still starts in.
    Raises: ValueError for free_early without a window, and as LLMEngine does."""
    if free_early and window is None:
        raise ValueError("free_early needs a sliding window: without one no block is freed while a "
                         "sequence runs")
    engine = LLMEngine(with_window(model, window), tokenizer, cache_config, scheduler_config,
                       kv_layout=kv_layout)
    if free_early:
        engine.block_manager.free_early = True
    return engine
