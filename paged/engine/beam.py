"""Beam search on shared blocks (the PagedAttention paper, §4.4): K beams form a tree over the pool.

After the prompt's prefill, and after every decode step, `select` (paged/chapters/beam_select.py,
the pure selection math) keeps the K best continuations. A beam chosen by several continuations is
forked (`BlockManager.fork`: the children share all its blocks, ref counts up); a beam chosen by
none is pruned and frees its blocks at once; a beam that writes its next token into a shared,
partly filled last block gets its own copy first (`append_slot`'s copy-on-write, carried out from
`pending_copies` before the model runs). Each step's forks, copies and frees are in its trace.

The whole driver is this one module:
- BeamParams(beam_width=K, length_penalty=..., max_tokens=...): our vLLM `BeamSearchParams` (the
  engine's SamplingParams is left as it is);
- BeamSearch: one pool and the model; `run` one prompt, `run_all` several at once. With the
  contiguous layout the same driver is the reference twin (a fork copies the cache, the block
  accounting is the same). Prefix caching (the prompt's cached full blocks reused), chunked prefill
  (the prompt fed in max_num_batched_tokens chunks) and preemption: when the pool runs short, the
  latest admitted beam group is preempted as a whole and resumed by recompute. A sliding window
  (model.config.sliding_window, e.g. a Mistral checkpoint): every beam reads only its window and,
  after each step, the blocks wholly behind it are freed (WindowBlockManager.slide, as the engine
  does; the trace's window_freed). It refuses, with a ValueError, a group the pool could not hold
  alone even without sharing, and K above max_num_seqs or max_num_batched_tokens. skip_cow=True is
  the break-it: a beam writes into the shared last block instead of copying it;
- BeamGroup: one prompt's beams while the search runs (prefill, decode, choose, fork, prune;
  preempted as a whole, resumed by recompute);
- BeamStepTrace / BeamResult: what one step did (a StepTrace plus the tree's moves), what a search
  returns. The CLI's `--beam-width` branch is in paged/__main__.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch

from ..addressing import blocks_needed
from ..chapters.beam_select import Finished, Hypothesis, select
from ..checks import as_bool, as_float, as_int
from ..config import CacheConfig, SchedulerConfig
from ..attention import DECODE_IMPLS
from ..kernels import default_attn_impl
from ..sequence import Sequence, SequenceStatus
from .admission import pool_num_blocks, prompt_token_ids
from .trace import SeqStepState, StepTrace
from .windowing import WINDOW_IMPLS, block_manager_for, runner_for, slide

__all__ = ["MAX_BEAM_WIDTH", "BeamGroup", "BeamParams", "BeamResult", "BeamSearch", "BeamStepTrace"]

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


@dataclass
class BeamStepTrace(StepTrace):
    """A StepTrace plus what the beam tree did: beams (after the step, best first: seq_id, parent seq_id, token,
    score, cached_token_count, token_ids generated so far), pruned seq ids (their freed blocks are in
    blocks_freed), hypotheses finished this step (parent seq_id, token_ids, score), the tables the model read
    (tables_read), and cow_skipped (break-it: (seq_id, shared block) written without a copy). A group preempted
    as a whole gets a trace of phase "preempt": its beams in `preempted`, the blocks released in blocks_freed."""

    beams: list[dict] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)
    hypotheses: list[dict] = field(default_factory=list)
    tables_read: dict[int, list[int]] = field(default_factory=dict)
    cow_skipped: list[tuple[int, int]] = field(default_factory=list)

    @property
    def blocks_shared(self) -> int:
        """Distinct physical blocks the running beams' tables held when the model ran (with sharing)."""
        return len({b for t in self.tables_read.values() for b in t})

    @property
    def blocks_unshared(self) -> int:
        """Blocks the same beams would hold without sharing: every table its own."""
        return sum(len(t) for t in self.tables_read.values())


@dataclass
class BeamResult:
    """The K finished beams, best first, every step's trace, and how often the group was preempted."""

    prompt_token_ids: list[int]
    beams: list[Hypothesis]
    traces: list[BeamStepTrace]
    preemptions: int = 0

    def memory(self) -> tuple[int, int]:
        """(blocks with sharing, blocks without) summed over the steps: KV memory x time, the paper's §4.4 saving
        is 1 - the first / the second."""
        return (sum(t.blocks_shared for t in self.traces), sum(t.blocks_unshared for t in self.traces))


class BeamSearch:
    """One pool (paged, or the contiguous twin) and the model; `run(prompt, params)` searches one prompt.

    A model whose config sets sliding_window gets the window's block manager and runner
    (paged/engine/windowing.py).
    Raises ValueError for an unknown kv_layout or attn_impl (with a window: one of WINDOW_IMPLS),
    skip_cow with the contiguous layout (no blocks to share), or a scheduler_config asking for swap
    or speculation."""

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
            raise ValueError("skip_cow breaks the paged layout's copy-on-write; the contiguous twin shares nothing")
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


class BeamGroup:
    """One prompt's beams while the search runs: prefill the prompt (in chunks), then decode every
    beam one token a step; choose, fork, prune. Preempted as a whole: every beam's blocks freed, its
    tokens and scores kept; resumed by recompute (the prompt prefilled again, the beams forked from
    it again, each beam's generated tokens fed again in one step), then decoding goes on."""

    def __init__(self, search: BeamSearch, prompt_ids: list[int], params: BeamParams) -> None:
        self.search, self.params = search, params
        self.bm, self.runner = search.block_manager, search.runner
        self.beams: list[Sequence] = [search.new_seq(prompt_ids)]
        self.scores = torch.zeros(1, dtype=torch.float32)
        self.finished = Finished(params.beam_width)
        self.done = False
        self.saved: list[list[int]] | None = None  # preempted: each beam's generated tokens, to resume from
        self.refeed = False  # resumed: the beams' generated tokens (all but the newest) are fed at the next step
        self.preemptions = 0

    def _trace(self, phase: str, reason: str) -> BeamStepTrace:
        s = self.search
        trace = BeamStepTrace(step=s.step_count, phase=phase, reason=reason, kv_layout=s.kv_layout,
                              num_blocks=self.bm.num_blocks,
                              block_tables_before={b.seq_id: list(b.block_table) for b in self.beams})
        s.step_count += 1
        return trace

    def step(self) -> BeamStepTrace:
        """Prefill (a chunk of) the prompt, re-feed the beams after a resume, or decode every beam one token; then
        choose, fork, prune."""
        head = self.beams[0]
        if head.status is SequenceStatus.WAITING:
            return self._prefill(head)
        if self.refeed:
            return self._refeed()
        trace = self._trace("decode", f"decode {len(self.beams)} beams")
        for seq in self.beams:
            self._append(seq, trace)
        logits = self._run(trace, self.beams, None)
        for s in self.beams:
            s.cached_token_count = s.num_tokens  # every known token is cached now
        self._choose(logits, trace)
        return self._end(trace)

    def _append(self, seq: Sequence, trace: BeamStepTrace) -> None:
        """The slot for seq's newest token: append_slot (a new block, or copy-on-write of a shared last block);
        the break-it instead leaves a shared, partly filled last block shared and writes into it."""
        last = seq.block_table[-1]
        if self.search.skip_cow and not self.bm.needs_new_block(seq) and self.bm.ref_counts[last] > 1:
            trace.cow_skipped.append((seq.seq_id, last))
            return
        self.bm.append_slot(seq)

    def _budget(self) -> int | None:
        sc = self.search.scheduler_config
        return sc.max_num_batched_tokens if sc.enable_chunked_prefill else None

    def _prefill(self, seq: Sequence) -> BeamStepTrace:
        budget = self._budget()
        trace = self._trace("prefill", "prefill the prompt" if self.saved is None
                            else "prefill the prompt again (resume after a preemption)")
        if not seq.block_table:
            self.bm.allocate(seq, budget)
        n = seq.num_uncached_tokens if budget is None else min(budget, seq.num_uncached_tokens)
        self.bm.ensure_capacity(seq, seq.cached_token_count + n)
        logits = self._run(trace, [seq], [n] if budget is not None else None)
        if n < seq.num_uncached_tokens:
            trace.reason = f"prefill a chunk of {n} prompt tokens"
            seq.on_chunk_done(n)
            return self._end(trace)
        seq.cached_token_count, seq.status = seq.num_tokens, SequenceStatus.RUNNING
        if self.saved is not None:
            self._refork(trace)
        else:
            self._choose(logits, trace)
        return self._end(trace)

    def _refork(self, trace: BeamStepTrace) -> None:
        """Resume after a preemption: the beams forked from the prompt again, each given its tokens back."""
        head, saved = self.beams[0], self.saved
        self.saved = None
        for tokens in saved[1:]:
            child = self.search.new_seq(head.prompt_token_ids)
            self.bm.fork(head, child)
            self.runner.fork(head.seq_id, child.seq_id)
            child.cached_token_count, child.status = head.cached_token_count, SequenceStatus.RUNNING
            trace.forked.setdefault(head.seq_id, []).append(child.seq_id)
            self.beams.append(child)
        for seq, tokens in zip(self.beams, saved):
            seq.generated_token_ids = list(tokens)
        self.refeed = any(len(t) > 1 for t in saved)

    def _refeed(self) -> BeamStepTrace:
        """Recompute: every beam with more than one generated token is fed all of them but the newest (its first
        slot through append_slot: a new block, or a copy of the shared last block)."""
        trace = self._trace("prefill", "recompute the beams' tokens (resume after a preemption)")
        seqs = [s for s in self.beams if s.num_uncached_tokens > 1]
        for s in seqs:
            self.bm.append_slot(s)
            self.bm.ensure_capacity(s, s.num_tokens - 1)
        chunks = [s.num_uncached_tokens - 1 for s in seqs]
        self._run(trace, seqs, chunks)
        for s, n in zip(seqs, chunks):
            s.cached_token_count += n
        self.refeed = False
        return self._end(trace)

    def blocks_for_next_step(self) -> int:
        """Free blocks the next step takes, exactly (BeamSearch.run_all preempts until they are)."""
        bm, head = self.bm, self.beams[0]
        if head.status is SequenceStatus.WAITING:
            budget = self._budget()
            if head.block_table:
                n = head.num_uncached_tokens if budget is None else min(budget, head.num_uncached_tokens)
                return bm.blocks_to_grow(head, head.cached_token_count + n)
            return 0 if bm.can_allocate(head, budget) else bm.num_blocks + 1  # allocate's own rule
        seqs = [s for s in self.beams if s.num_uncached_tokens > 1] if self.refeed else self.beams
        need = sum(bm.needs_new_block(s) for s in seqs)
        shared = Counter(s.block_table[-1] for s in seqs
                         if not bm.needs_new_block(s) and bm.ref_counts[s.block_table[-1]] > 1)
        need += sum(h if bm.ref_counts[b] > h else h - 1 for b, h in shared.items())  # the last holder keeps it
        if self.refeed:  # the rest of the re-fed tokens
            need += sum(max(0, blocks_needed(s.num_tokens - 1, bm.block_size) - len(s.block_table)
                            - bm.needs_new_block(s)) for s in seqs)
        return need

    @property
    def holds_blocks(self) -> bool:
        return any(s.block_table for s in self.beams)

    def preempt(self) -> dict[int, list[int]]:
        """Preempt the whole group: every beam's blocks freed (returned: seq id -> blocks released), its tokens,
        scores and finished hypotheses kept; the next steps prefill the prompt again and resume."""
        head = self.beams[0]
        if head.status is not SequenceStatus.WAITING:  # the beams exist (a group preempted mid-prompt restarts)
            self.saved = [list(s.generated_token_ids) for s in self.beams]
        freed = {s.seq_id: self._release(s) for s in self.beams if s.block_table}
        self.beams = [self.search.new_seq(head.prompt_token_ids)]
        self.refeed = False
        self.preemptions += 1
        return freed

    def _run(self, trace: BeamStepTrace, seqs: list[Sequence], chunks: list[int] | None) -> torch.Tensor:
        """Carry out the step's copies, record its new blocks, run the model on `seqs` (chunks: tokens fed each,
        default all uncached); returns the logits [len(seqs), vocab]."""
        bm, runner = self.bm, self.runner
        trace.copies, bm.pending_copies = bm.pending_copies, []
        runner.copy_blocks(trace.copies)  # before anything is written
        trace.tables_read = {s.seq_id: list(s.block_table) for s in seqs}
        for s in seqs:
            before = trace.block_tables_before.get(s.seq_id, [])
            swapped = [b for b, a in zip(s.block_table, before) if b != a]
            hits = bm.last_hits.get(s.seq_id, []) if trace.phase == "prefill" else []  # prefix-cache hits: reused
            grown = [b for i, b in enumerate(s.block_table[len(before):], len(before))
                     if not (i < len(hits) and hits[i])]
            if grown or swapped:
                trace.blocks_allocated[s.seq_id] = swapped + grown
        batch = runner.prepare(seqs, trace.phase == "prefill", chunks)
        logits = runner.run(seqs, batch)  # [B, vocab]
        trace.slot_mapping = batch.slot_mapping.tolist()
        at = 0
        for s, n, ctx in zip(seqs, batch.query_lens, batch.context_lens.tolist()):
            trace.seqs.append(SeqStepState(s.seq_id, s.token_ids[s.cached_token_count:s.cached_token_count + n],
                                           list(range(s.cached_token_count, s.cached_token_count + n)),
                                           trace.slot_mapping[at:at + n], ctx, None, cached_token_count=ctx,
                                           generated_len=len(s.generated_token_ids)))
            at += n
        return logits

    def _choose(self, logits: torch.Tensor, trace: BeamStepTrace) -> None:
        """Select the next beams; fork the beams chosen more than once, prune those chosen by none."""
        p = self.params
        histories = [list(s.generated_token_ids) for s in self.beams]
        last = len(histories[0]) + 1 >= p.max_tokens
        choices, entered = select(logits, self.scores, histories, self.finished, self.search.eos_ids, last,
                                  p.length_penalty)
        trace.hypotheses = [{"parent": self.beams[row].seq_id, "token_ids": h.token_ids, "score": h.score}
                            for row, h in entered]
        self.done = last or self.finished.full
        if self.done:
            choices = []
        chosen = {c.parent for c in choices}
        for row, seq in enumerate(self.beams):  # pruned (or, at the end, finished) first: their blocks free at once
            if row not in chosen:
                (trace.finished if self.done else trace.pruned).append(seq.seq_id)
                trace.blocks_freed[seq.seq_id] = self._release(seq)
        taken: set[int] = set()
        new_beams = []
        for c in choices:
            parent = self.beams[c.parent]
            seq = parent
            if c.parent in taken:  # a second child: fork from the parent before it takes its own token
                seq = self.search.new_seq(parent.prompt_token_ids)
                self.bm.fork(parent, seq)
                self.runner.fork(parent.seq_id, seq.seq_id)
                seq.generated_token_ids = list(histories[c.parent])
                seq.cached_token_count, seq.status = parent.cached_token_count, SequenceStatus.RUNNING
                trace.forked.setdefault(parent.seq_id, []).append(seq.seq_id)
            taken.add(c.parent)
            new_beams.append(seq)
            trace.beams.append({"seq_id": seq.seq_id, "parent": parent.seq_id, "token": c.token, "score": c.score})
        for seq, c, said in zip(new_beams, choices, trace.beams):  # each beam knows one token more than it cached
            seq.generated_token_ids.append(c.token)
            said.update(cached_token_count=seq.cached_token_count, token_ids=list(seq.generated_token_ids))
        self.beams = new_beams
        self.scores = torch.tensor([c.score for c in choices], dtype=torch.float32)

    def _release(self, seq: Sequence) -> list[int]:
        seq.status = SequenceStatus.FINISHED
        self.runner.release(seq.seq_id)
        return self.bm.free(seq)

    def _end(self, trace: BeamStepTrace) -> BeamStepTrace:
        """Close the step's trace; with a sliding window, first free what each window left."""
        if not self.done and self.beams[0].status is not SequenceStatus.WAITING:
            trace.window_freed = slide(self.bm, self.beams)
        trace.block_tables_after = {s.seq_id: list(s.block_table) for s in self.beams if s.block_table}
        trace.running = [s.seq_id for s in self.beams] if not self.done else []
        trace.num_free_blocks = self.bm.num_free_blocks
        return trace
