"""BatchInput: the model inputs of one engine step.

Built by the runner (paged/engine/runner.py) and rebuilt link by link by a fault
(paged/faults/hooks.py); it lives here so both import it and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch


@dataclass
class BatchInput:
    """Model inputs of one step; tokens of the scheduled sequences back to back."""

    is_prefill: bool
    seq_ids: list[int]
    input_ids: torch.Tensor  # [N] int64
    positions: torch.Tensor  # [N] int64
    slot_mapping: torch.Tensor  # [N] int64 (paged layout; -1 = skip)
    block_tables: torch.Tensor  # [B, max_blocks] int32, -1 padded
    # [B] int64: history read by each sequence, this step's tokens included
    context_lens: torch.Tensor
    query_lens: list[int]  # tokens fed per sequence
    # built for chunked prefill (tokens fed per sequence given): decodes may sit beside chunks
    chunked: bool = False

    @cached_property
    def starts(self) -> list[int]:
        """Where each sequence's tokens start in the batch, [B] (cached: read once per sequence)."""
        out, at = [], 0
        for n in self.query_lens:
            out.append(at)
            at += n
        return out
