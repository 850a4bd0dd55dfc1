"""Beam search on shared blocks (the PagedAttention paper, §4.4): K beams form a tree over the block pool.

After the prompt's prefill, and after every decode step, `beam_select.select` keeps the K best continuations. A
beam chosen by several continuations is forked (`BlockManager.fork`: the children share all its blocks, ref counts
up); a beam chosen by none is pruned and frees its blocks at once; a beam that writes its next token into a shared,
partly filled last block gets its own copy first (`append_slot`'s copy-on-write, carried out from
`pending_copies` before the model runs). Each step's forks, copies and frees are in its BeamStepTrace.

BeamParams(beam_width=K, length_penalty=..., max_tokens=...) is this module's equivalent of vLLM's
`BeamSearchParams`: the engine's SamplingParams is left as it is, and one BeamSearch runs one prompt's beam group
at a time on its own pool. With the contiguous layout the same driver is the reference twin (a fork copies the
cache). What it supports: prefix caching (the prompt's cached full blocks are reused) and chunked prefill (the
prompt fed in max_num_batched_tokens chunks). What it refuses, with a ValueError: a pool that could not hold the
K beams without sharing (a beam group is never preempted), K above max_num_seqs or max_num_batched_tokens.
skip_cow=True is the break-it: a beam writes into the shared last block instead of copying it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .addressing import blocks_needed
from .beam_select import Finished, Hypothesis, select
from .block_manager import BlockManager
from .checks import as_bool, as_float, as_int
from .config import CacheConfig, SchedulerConfig
from .engine.admission import pool_num_blocks, prompt_token_ids
from .engine.runner import ModelRunner
from .engine.trace import SeqStepState, StepTrace
from .kernels import DECODE_IMPLS, default_attn_impl
from .sequence import Sequence, SequenceStatus

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
    (tables_read), and cow_skipped (break-it: (seq_id, shared block) written without a copy)."""

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
    """The K finished beams, best first, and every step's trace."""

    prompt_token_ids: list[int]
    beams: list[Hypothesis]
    traces: list[BeamStepTrace]

    def memory(self) -> tuple[int, int]:
        """(blocks with sharing, blocks without) summed over the steps: KV memory x time, the paper's §4.4 saving
        is 1 - the first / the second."""
        return (sum(t.blocks_shared for t in self.traces), sum(t.blocks_unshared for t in self.traces))


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
                             f"sharing left), the pool has {bm.num_blocks}: beam search never preempts its beam "
                             "group; raise num_blocks or lower beam_width / max_tokens")

    def run(self, prompt: str | list[int], params: BeamParams | None = None) -> BeamResult:
        """Beam-search one prompt (text or token ids); every step's trace is kept in the result."""
        params = params or BeamParams()
        ids = prompt_token_ids(prompt, self.tokenizer, self.model.config.vocab_size)
        self.check(len(ids), params)
        group = _Group(self, ids, params)
        traces = []
        while not group.done:
            traces.append(group.step())
        return BeamResult(ids, group.finished.best(), traces)

    def new_seq(self, prompt_ids: list[int]) -> Sequence:
        seq = Sequence(self._next_id, list(prompt_ids))
        self._next_id += 1
        return seq


class _Group:
    """One prompt's beams while the search runs."""

    def __init__(self, search: BeamSearch, prompt_ids: list[int], params: BeamParams) -> None:
        self.search, self.params = search, params
        self.bm, self.runner = search.block_manager, search.runner
        self.beams: list[Sequence] = [search.new_seq(prompt_ids)]
        self.scores = torch.zeros(1, dtype=torch.float32)
        self.finished = Finished(params.beam_width)
        self.done = False

    def _trace(self, phase: str, reason: str) -> BeamStepTrace:
        s = self.search
        trace = BeamStepTrace(step=s.step_count, phase=phase, reason=reason, kv_layout=s.kv_layout,
                              num_blocks=self.bm.num_blocks,
                              block_tables_before={b.seq_id: list(b.block_table) for b in self.beams})
        s.step_count += 1
        return trace

    def step(self) -> BeamStepTrace:
        """Prefill (a chunk of) the prompt, or decode every beam one token; then choose, fork, prune."""
        head = self.beams[0]
        if head.status is SequenceStatus.WAITING:
            return self._prefill(head)
        trace = self._trace("decode", f"decode {len(self.beams)} beams")
        for seq in self.beams:
            self._append(seq, trace)
        return self._forward(trace, None)

    def _prefill(self, seq: Sequence) -> BeamStepTrace:
        sc = self.search.scheduler_config
        budget = sc.max_num_batched_tokens if sc.enable_chunked_prefill else None
        trace = self._trace("prefill", "prefill the prompt")
        if not seq.block_table:
            self.bm.allocate(seq, budget)
        n = seq.num_uncached_tokens if budget is None else min(budget, seq.num_uncached_tokens)
        self.bm.ensure_capacity(seq, seq.cached_token_count + n)
        if n < seq.num_uncached_tokens:
            trace.reason = f"prefill a chunk of {n} prompt tokens"
        return self._forward(trace, n if budget is not None else None)

    def _append(self, seq: Sequence, trace: BeamStepTrace) -> None:
        """The slot for seq's newest token: append_slot (a new block, or copy-on-write of a shared last block);
        the break-it instead leaves a shared, partly filled last block shared and writes into it."""
        last = seq.block_table[-1]
        if self.search.skip_cow and not self.bm.needs_new_block(seq) and self.bm.ref_counts[last] > 1:
            trace.cow_skipped.append((seq.seq_id, last))
            return
        self.bm.append_slot(seq)

    def _forward(self, trace: BeamStepTrace, chunk: int | None) -> BeamStepTrace:
        bm, runner, seqs = self.bm, self.runner, self.beams
        trace.copies, bm.pending_copies = bm.pending_copies, []
        runner.copy_blocks(trace.copies)  # before anything is written
        trace.tables_read = {s.seq_id: list(s.block_table) for s in seqs}
        for s in seqs:
            grown = s.block_table[len(trace.block_tables_before[s.seq_id]):]
            swapped = [b for b, a in zip(s.block_table, trace.block_tables_before[s.seq_id]) if b != a]
            hits = bm.last_hits.get(s.seq_id, []) if trace.phase == "prefill" else []  # prefix-cache hits: reused
            grown = [b for i, b in enumerate(grown, len(trace.block_tables_before[s.seq_id]))
                     if not (i < len(hits) and hits[i])]
            if grown or swapped:
                trace.blocks_allocated[s.seq_id] = swapped + grown
        is_prefill = trace.phase == "prefill"
        batch = runner.prepare(seqs, is_prefill, [chunk] if chunk is not None else None)
        logits = runner.run(seqs, batch)  # [B, vocab]
        trace.slot_mapping = batch.slot_mapping.tolist()
        at = 0
        for s, n, ctx in zip(seqs, batch.query_lens, batch.context_lens.tolist()):
            trace.seqs.append(SeqStepState(s.seq_id, s.token_ids[s.cached_token_count:s.cached_token_count + n],
                                           list(range(s.cached_token_count, s.cached_token_count + n)),
                                           trace.slot_mapping[at:at + n], ctx, None, cached_token_count=ctx,
                                           generated_len=len(s.generated_token_ids)))
            at += n
        if is_prefill and chunk is not None and chunk < seqs[0].num_uncached_tokens:
            seqs[0].on_chunk_done(chunk)
            return self._end(trace)
        for s in seqs:
            s.cached_token_count = s.num_tokens  # every known token is cached now
            s.status = SequenceStatus.RUNNING
        self._choose(logits, trace)
        return self._end(trace)

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
        trace.block_tables_after = {s.seq_id: list(s.block_table) for s in self.beams if s.block_table}
        trace.running = [s.seq_id for s in self.beams] if not self.done else []
        trace.num_free_blocks = self.bm.num_free_blocks
        return trace
