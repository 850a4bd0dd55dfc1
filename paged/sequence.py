"""A sequence and its state rule: cached_token_count (K/V written) vs generated_token_ids (sampled).

After prefill cached == len(prompt) and generated == [t1]; each decode step feeds the last token,
writes its K/V (cached += 1) and samples the next: before a decode cached == num_tokens - 1.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .addressing import blocks_needed
from .checks import check_sequence

if TYPE_CHECKING:
    import torch
    from .config import SamplingParams


class SequenceStatus(str, enum.Enum):
    WAITING = "waiting"    # queued; no blocks (or preempted: blocks freed, will recompute)
    RUNNING = "running"    # owns blocks, decoding
    FINISHED = "finished"  # done; blocks returned to the free list


@dataclass
class Sequence:
    """One request's tokens, block table and place in the state rule, and the engine's bookkeeping.
    Raises: ValueError unless seq_id >= 0 and prompt_token_ids is a non-empty list of ids >= 0."""

    seq_id: int
    prompt_token_ids: list[int]
    generated_token_ids: list[int] = field(default_factory=list)
    block_table: list[int] = field(default_factory=list)  # logical block -> physical block
    cached_token_count: int = 0
    status: SequenceStatus = SequenceStatus.WAITING
    finish_reason: str | None = None  # "length", "stop", "eos", "abort", "error" (its step raised)
    request_id: int | None = None  # None: its own seq_id
    sample_index: int = 0  # which of n parallel samples (0: the parent)
    params: SamplingParams | None = None  # None outside an engine, as generator
    generator: torch.Generator | None = None
    preemptions: int = 0
    n: int = 1  # samples it still forks into after its prefill

    def __post_init__(self) -> None:
        self.seq_id, self.prompt_token_ids, self.request_id = check_sequence(
            self.seq_id, self.prompt_token_ids, self.request_id)

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: everything the sequence knows."""
        return len(self.prompt_token_ids) + len(self.generated_token_ids)

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.generated_token_ids

    @property
    def last_token_id(self) -> int:
        return (self.generated_token_ids or self.prompt_token_ids)[-1]

    @property
    def num_uncached_tokens(self) -> int:
        """Tokens the next forward pass must feed: the whole prompt at prefill, 1 at decode."""
        return self.num_tokens - self.cached_token_count

    def blocks_needed(self, block_size: int, num_tokens: int | None = None) -> int:
        """Blocks required to hold `num_tokens` (default: all tokens the sequence knows)."""
        return blocks_needed(self.num_tokens if num_tokens is None else num_tokens, block_size)

    def last_block_fill(self, block_size: int) -> int:
        """How many slots of the last allocated block hold cached tokens (0 without blocks)."""
        if not self.block_table:
            return 0
        used_before_last = (len(self.block_table) - 1) * block_size
        return max(0, min(block_size, self.cached_token_count - used_before_last))

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def on_prefill_done(self, first_token_id: int) -> None:
        """Prompt K/V written, first token sampled: cached = prompt_len, generated = [t1]."""
        self.cached_token_count = self.num_tokens  # every known token was fed (a recompute too)
        self.generated_token_ids.append(int(first_token_id))

    def on_chunk_done(self, num_tokens: int) -> None:
        """Chunked prefill: a non-final chunk of `num_tokens` tokens was written (cached += it)."""
        assert 0 < num_tokens < self.num_uncached_tokens, \
            "a non-final chunk leaves at least one token uncached"
        self.cached_token_count += num_tokens

    def on_decode_done(self, next_token_id: int) -> None:
        """The last generated token's K/V written (cached += 1), the next token sampled."""
        assert self.cached_token_count == self.num_tokens - 1, \
            "decode expects exactly one uncached token"
        self.cached_token_count += 1
        self.generated_token_ids.append(int(next_token_id))

    def reset_for_recompute(self) -> None:
        """Preemption by recompute: nothing counts as cached; generated tokens are fed again."""
        self.cached_token_count = 0
        self.block_table = []
        self.status = SequenceStatus.WAITING
