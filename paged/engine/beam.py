"""Beam search on shared blocks (the PagedAttention paper, section 4.4): the driver, BeamSearch.

BeamSearch holds one pool and the model; `run` searches one prompt, `run_all` several at once, each
as a BeamGroup (paged/engine/beam_group.py, with BeamParams, our vLLM `BeamSearchParams`, and the
traces). With the contiguous layout the same driver is the reference twin (a fork copies the cache;
the block accounting is the same). It supports prefix caching, chunked prefill (the prompt fed in
max_num_batched_tokens chunks) and preemption: when the pool runs short, the latest admitted group
is preempted as a whole and resumed by recompute. With a sliding window
(model.config.sliding_window) every beam reads only its window and the blocks wholly behind it are
freed after each step (the trace's window_freed). skip_cow=True is the break-it: a beam writes into
the shared last block instead of copying it. The CLI's `--beam-width` branch is in
paged/__main__.py.
"""

from __future__ import annotations

import torch

from ..addressing import blocks_needed
from ..attention import DECODE_IMPLS
from ..checks import as_bool
from ..config import CacheConfig, SchedulerConfig
from ..kernels import default_attn_impl
from ..sequence import Sequence
from .admission import pool_num_blocks, prompt_token_ids
from .beam_group import BeamGroup, BeamParams, BeamResult, BeamStepTrace
from .windowing import WINDOW_IMPLS, block_manager_for, runner_for

__all__ = ["BeamSearch"]


class BeamSearch:
    """One pool (paged, or the contiguous twin) and the model; `run(prompt, params)` searches.

    A model with a sliding_window gets the window's block manager and runner (windowing.py).
    Raises: ValueError for an unknown kv_layout or attn_impl, skip_cow with the contiguous layout,
    or a scheduler_config asking for swap or speculation."""

    def __init__(self, model: torch.nn.Module, tokenizer, cache_config: CacheConfig | None = None,
                 scheduler_config: SchedulerConfig | None = None, kv_layout: str = "paged",
                 attn_impl: str | None = None, skip_cow: bool = False) -> None:
        self.model, self.tokenizer = model.eval(), tokenizer
        self.cache_config = cc = cache_config or CacheConfig()
        self.scheduler_config = scheduler_config or SchedulerConfig()
        self.skip_cow = as_bool(skip_cow, "skip_cow")
        sc = self.scheduler_config
        if sc.preemption_mode != "recompute" or sc.speculative is not None:  # never ignored
            raise ValueError(f"beam search runs its own driver: it preempts a beam group by "
                             f"recompute only and does not speculate; got preemption_mode="
                             f"{sc.preemption_mode!r}, speculative={sc.speculative!r}")
        if kv_layout not in ("paged", "contiguous"):
            raise ValueError(f"kv_layout must be 'paged' or 'contiguous', got {kv_layout!r}")
        if self.skip_cow and kv_layout != "paged":
            raise ValueError("skip_cow breaks the paged layout's copy-on-write; the contiguous "
                             "twin shares nothing")
        param = next(model.parameters())
        num_blocks = pool_num_blocks(model.config, cc, param.dtype, param.device)
        self.block_manager = block_manager_for(
            model.config, num_blocks, cc.block_size, cc.watermark, cc.seed,
            cc.enable_prefix_caching and kv_layout == "paged")
        window = getattr(model.config, "sliding_window", None)
        impl = attn_impl or (WINDOW_IMPLS[0] if window else default_attn_impl(param.device))
        if impl not in DECODE_IMPLS:
            raise ValueError(f"unknown attn_impl {impl!r}; choose one of {sorted(DECODE_IMPLS)}")
        # ValueError for an impl without a window when the model has one
        self.runner = runner_for(model, num_blocks, cc.block_size, kv_layout, impl)
        self.kv_layout = kv_layout
        eos = getattr(tokenizer, "eos_token_ids", None)
        self.eos_ids = tuple(eos) if eos is not None else (tokenizer.eos_token_id,)
        self.step_count = 0
        self._next_id = 0

    def check(self, num_prompt_tokens: int, params: BeamParams) -> None:
        """Check that a search of `num_prompt_tokens` could run without preempting its group.

        Raises: ValueError for bad params, or a group over the positions, the batch or the pool."""
        if not isinstance(params, BeamParams):
            raise ValueError(f"params must be a BeamParams, got {type(params).__name__}")
        K, sc, bm = params.beam_width, self.scheduler_config, self.block_manager
        total = num_prompt_tokens + params.max_tokens
        if total > self.model.config.max_position_embeddings:
            raise ValueError(f"prompt ({num_prompt_tokens} tokens) + max_tokens "
                             f"({params.max_tokens}) exceeds max_position_embeddings "
                             f"({self.model.config.max_position_embeddings})")
        if K > sc.max_num_seqs or K > sc.max_num_batched_tokens:
            raise ValueError(f"beam_width {K} exceeds max_num_seqs ({sc.max_num_seqs}) or "
                             f"max_num_batched_tokens ({sc.max_num_batched_tokens}): a beam group "
                             "runs as a whole")
        if num_prompt_tokens > sc.max_num_batched_tokens and not sc.enable_chunked_prefill:
            raise ValueError(f"the prompt ({num_prompt_tokens} tokens) exceeds "
                             f"max_num_batched_tokens ({sc.max_num_batched_tokens}); enable "
                             "chunked prefill or shorten it")
        need = K * blocks_needed(total, bm.block_size)
        if need > bm.num_blocks:
            raise ValueError(f"beam_width {K} x {total} tokens could need {need} blocks of "
                             f"{bm.block_size} (no sharing left), the pool has {bm.num_blocks}: a "
                             "beam group is preempted only as a whole, so the pool must hold one "
                             "alone; raise num_blocks or lower beam_width / max_tokens")

    def run(self, prompt: str | list[int], params: BeamParams | None = None) -> BeamResult:
        """Beam-search one prompt (text or token ids); every step's trace is kept in the result."""
        return self.run_all([prompt], params)[0]

    def run_all(self, prompts: list[str | list[int]],
                params: BeamParams | None = None) -> list[BeamResult]:
        """Beam-search several prompts on the one pool; one BeamResult each, in order.

        Each round admits the waiting groups whose first blocks are free, then runs every running
        group one step in admission order. When a step needs more free blocks than there are, the
        latest admitted group is preempted as a whole (a "preempt" trace); it waits first in line
        and resumes by recompute.
        Raises: ValueError as `check` does; RuntimeError if no group can start."""
        params = params or BeamParams()
        ids = [prompt_token_ids(p, self.tokenizer, self.model.config.vocab_size) for p in prompts]
        for one in ids:
            self.check(len(one), params)
        groups = [BeamGroup(self, one, params) for one in ids]
        traces: dict[int, list[BeamStepTrace]] = {id(g): [] for g in groups}
        waiting, running = list(groups), []
        while waiting or running:
            while waiting and (waiting[0].blocks_for_next_step()
                               <= self.block_manager.num_free_blocks):
                running.append(waiting.pop(0))
            if not running:
                raise RuntimeError(f"no beam group can start: {self.block_manager.num_free_blocks} "
                                   "free blocks")
            for group in list(running):
                while group in running and (group.blocks_for_next_step()
                                            > self.block_manager.num_free_blocks):
                    victim = running.pop()
                    # else it was admitted but never ran: it only goes back to waiting
                    if victim.holds_blocks:
                        traces[id(victim)].append(self._preempted(victim))
                    waiting.insert(0, victim)
                if group in running:
                    traces[id(group)].append(group.step())
                    if group.done:
                        running.remove(group)
        return [BeamResult(one, g.finished.best(), traces[id(g)], g.preemptions)
                for one, g in zip(ids, groups)]

    def _preempted(self, group: BeamGroup) -> BeamStepTrace:
        """Preempt `group` as a whole; the trace says which beams and which blocks."""
        seq_ids = [s.seq_id for s in group.beams]
        trace = BeamStepTrace(step=self.step_count, phase="preempt",
                              reason="the pool ran short: the latest admitted beam group is "
                                     "preempted as a whole", kv_layout=self.kv_layout,
                              num_blocks=self.block_manager.num_blocks,
                              block_tables_before={s.seq_id: list(s.block_table)
                                                   for s in group.beams},
                              preempted=seq_ids)
        self.step_count += 1
        trace.blocks_freed = group.preempt()
        trace.num_free_blocks = self.block_manager.num_free_blocks
        return trace

    def new_seq(self, prompt_ids: list[int]) -> Sequence:
        seq = Sequence(self._next_id, list(prompt_ids))
        self._next_id += 1
        return seq

