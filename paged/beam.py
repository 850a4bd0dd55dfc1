"""Beam search on shared blocks (the PagedAttention paper, §4.4): K beams form a tree over the block pool.

After the prompt's prefill, and after every decode step, `beam_select.select` keeps the K best continuations. A
beam chosen by several continuations is forked (`BlockManager.fork`: the children share all its blocks, ref counts
up); a beam chosen by none is pruned and frees its blocks at once; a beam that writes its next token into a shared,
partly filled last block gets its own copy first (`append_slot`'s copy-on-write, carried out from
`pending_copies` before the model runs). Each step's forks, copies and frees are in its BeamStepTrace.

BeamParams(beam_width=K, length_penalty=..., max_tokens=...) is this module's equivalent of vLLM's
`BeamSearchParams`: the engine's SamplingParams is left as it is; a BeamSearch runs beam groups on its own pool
(`run` one prompt, `run_all` several at once). With the contiguous layout the same driver is the reference twin (a
fork copies the cache, the block accounting is the same). It supports prefix caching (the prompt's cached full
blocks are reused), chunked prefill (the prompt fed in max_num_batched_tokens chunks) and preemption: when the
pool runs short, the latest admitted beam group is preempted as a whole and resumed by recompute (beam_group.py).
It refuses, with a ValueError, a group the pool could not hold alone even without sharing, and K above
max_num_seqs or max_num_batched_tokens. skip_cow=True is the break-it: a beam writes into the shared last block
instead of copying it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .addressing import blocks_needed
from .beam_group import BeamGroup
from .beam_trace import BeamResult, BeamStepTrace
from .block_manager import BlockManager
from .checks import as_bool, as_float, as_int
from .config import CacheConfig, SchedulerConfig
from .engine.admission import pool_num_blocks, prompt_token_ids
from .engine.runner import ModelRunner
from .attention import DECODE_IMPLS
from .kernels import default_attn_impl
from .sequence import Sequence

__all__ = ["MAX_BEAM_WIDTH", "BeamParams", "BeamResult", "BeamSearch", "BeamStepTrace"]

MAX_BEAM_WIDTH = 16


@dataclass(frozen=True)
class BeamParams:
    """A beam search request. beam_width K in [2, MAX_BEAM_WIDTH] (transformers' num_beams = K with
    num_return_sequences = K); length_penalty: a finished beam scores sum_logprobs / generated_len ** it (any finite
    number; > 0 favours longer beams); max_tokens: tokens generated at most. Early stopping is always on: the search
    ends once K beams are finished. Raises ValueError for a bad value."""

    beam_width: int = 4
    length_penalty: float = 1.0
    max_tokens: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "beam_width", as_int(self.beam_width, "beam_width", 2, MAX_BEAM_WIDTH))
        object.__setattr__(self, "length_penalty", as_float(self.length_penalty, "length_penalty"))
        object.__setattr__(self, "max_tokens", as_int(self.max_tokens, "max_tokens", 1))


class BeamSearch:
    """One pool (paged, or the contiguous twin) and the model; `run(prompt, params)` searches one prompt.

    Raises ValueError for an unknown kv_layout or attn_impl, or skip_cow with the contiguous layout (it has no
    blocks to share)."""

    def __init__(self, model: torch.nn.Module, tokenizer, cache_config: CacheConfig | None = None,
                 scheduler_config: SchedulerConfig | None = None, kv_layout: str = "paged",
                 attn_impl: str | None = None, skip_cow: bool = False) -> None:
        self.model, self.tokenizer = model.eval(), tokenizer
        self.cache_config = cc = cache_config or CacheConfig()
        self.scheduler_config = scheduler_config or SchedulerConfig()
        self.skip_cow = as_bool(skip_cow, "skip_cow")
        if kv_layout not in ("paged", "contiguous"):
            raise ValueError(f"kv_layout must be 'paged' or 'contiguous', got {kv_layout!r}")
        if self.skip_cow and kv_layout != "paged":
            raise ValueError("skip_cow breaks the paged layout's copy-on-write; the contiguous twin shares nothing")
        param = next(model.parameters())
        num_blocks = pool_num_blocks(model.config, cc, param.dtype, param.device)
        self.block_manager = BlockManager(num_blocks, cc.block_size, cc.watermark, cc.seed,
                                          enable_prefix_caching=cc.enable_prefix_caching and kv_layout == "paged")
        impl = attn_impl or default_attn_impl(param.device)
        if impl not in DECODE_IMPLS:
            raise ValueError(f"unknown attn_impl {impl!r}; choose one of {sorted(DECODE_IMPLS)}")
        self.runner = ModelRunner(model, num_blocks, cc.block_size, kv_layout, impl)
        self.kv_layout = kv_layout
        eos = getattr(tokenizer, "eos_token_ids", None)
        self.eos_ids = tuple(eos) if eos is not None else (tokenizer.eos_token_id,)
        self.step_count = 0
        self._next_id = 0

    def check(self, num_prompt_tokens: int, params: BeamParams) -> None:
        """Refuse (ValueError) a search that could not run without preempting its beam group."""
        if not isinstance(params, BeamParams):
            raise ValueError(f"params must be a BeamParams, got {type(params).__name__}")
        K, sc, bm = params.beam_width, self.scheduler_config, self.block_manager
        total = num_prompt_tokens + params.max_tokens
        if total > self.model.config.max_position_embeddings:
            raise ValueError(f"prompt ({num_prompt_tokens} tokens) + max_tokens ({params.max_tokens}) exceeds "
                             f"max_position_embeddings ({self.model.config.max_position_embeddings})")
        if K > sc.max_num_seqs or K > sc.max_num_batched_tokens:
            raise ValueError(f"beam_width {K} exceeds max_num_seqs ({sc.max_num_seqs}) or max_num_batched_tokens "
                             f"({sc.max_num_batched_tokens}): a beam group runs as a whole")
        if num_prompt_tokens > sc.max_num_batched_tokens and not sc.enable_chunked_prefill:
            raise ValueError(f"the prompt ({num_prompt_tokens} tokens) exceeds max_num_batched_tokens "
                             f"({sc.max_num_batched_tokens}); enable chunked prefill or shorten it")
        need = K * blocks_needed(total, bm.block_size)
        if need > bm.num_blocks:
            raise ValueError(f"beam_width {K} x {total} tokens could need {need} blocks of {bm.block_size} (no "
                             f"sharing left), the pool has {bm.num_blocks}: a beam group is preempted only as a "
                             "whole, so the pool must hold one alone; raise num_blocks or lower beam_width / "
                             "max_tokens")

    def run(self, prompt: str | list[int], params: BeamParams | None = None) -> BeamResult:
        """Beam-search one prompt (text or token ids); every step's trace is kept in the result."""
        return self.run_all([prompt], params)[0]

    def run_all(self, prompts: list[str | list[int]], params: BeamParams | None = None) -> list[BeamResult]:
        """Beam-search several prompts on the one pool, one result each, in order. Each round runs every running
        group one step, in admission order, after admitting the waiting groups whose prompt's first blocks are
        free. When a group's step needs more free blocks than there are, the latest admitted running group is
        preempted as a whole (a "preempt" trace; it waits first in line and resumes by recompute)."""
        params = params or BeamParams()
        ids = [prompt_token_ids(p, self.tokenizer, self.model.config.vocab_size) for p in prompts]
        for one in ids:
            self.check(len(one), params)
        groups = [BeamGroup(self, one, params) for one in ids]
        traces: dict[int, list[BeamStepTrace]] = {id(g): [] for g in groups}
        waiting, running = list(groups), []
        while waiting or running:
            while waiting and waiting[0].blocks_for_next_step() <= self.block_manager.num_free_blocks:
                running.append(waiting.pop(0))
            if not running:
                raise RuntimeError(f"no beam group can start: {self.block_manager.num_free_blocks} free blocks")
            for group in list(running):
                while group in running and group.blocks_for_next_step() > self.block_manager.num_free_blocks:
                    victim = running.pop()
                    if victim.holds_blocks:  # else it was admitted but never ran: it only goes back to waiting
                        traces[id(victim)].append(self._preempted(victim))
                    waiting.insert(0, victim)
                if group in running:
                    traces[id(group)].append(group.step())
                    if group.done:
                        running.remove(group)
        return [BeamResult(one, g.finished.best(), traces[id(g)], g.preemptions) for one, g in zip(ids, groups)]

    def _preempted(self, group: BeamGroup) -> BeamStepTrace:
        """Preempt `group` as a whole; the trace says which beams and which blocks."""
        seq_ids = [s.seq_id for s in group.beams]
        trace = BeamStepTrace(step=self.step_count, phase="preempt", reason="the pool ran short: the latest "
                              "admitted beam group is preempted as a whole", kv_layout=self.kv_layout,
                              num_blocks=self.block_manager.num_blocks,
                              block_tables_before={s.seq_id: list(s.block_table) for s in group.beams},
                              preempted=seq_ids)
        self.step_count += 1
        trace.blocks_freed = group.preempt()
        trace.num_free_blocks = self.block_manager.num_free_blocks
        return trace

    def new_seq(self, prompt_ids: list[int]) -> Sequence:
        seq = Sequence(self._next_id, list(prompt_ids))
        self._next_id += 1
        return seq
