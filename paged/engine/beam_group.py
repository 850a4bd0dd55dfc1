"""Beam search's bookkeeping: the request, one prompt's beams (BeamGroup), what a step did.

BeamGroup runs one prompt's K beams as a tree over the pool (the PagedAttention paper, section 4.4):
after the prefill and after every decode step, `select` (paged/chapters/beam_select.py) keeps the K
best continuations. A beam chosen by several is forked (`BlockManager.fork`: the children share its
blocks, ref counts up); a beam chosen by none is pruned and frees its blocks at once; a beam writing
into a shared, partly filled last block gets its own copy first (`append_slot`'s copy-on-write,
carried out from `pending_copies` before the model runs). Each step's forks, copies and frees are in
its BeamStepTrace. The driver that admits and preempts groups is paged/engine/beam.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ..addressing import blocks_needed
from ..chapters.beam_select import Finished, Hypothesis, select
from ..checks import as_float, as_int
from ..sequence import Sequence, SequenceStatus
from .trace import SeqStepState, StepTrace
from .windowing import slide

if TYPE_CHECKING:
    from .beam import BeamSearch

__all__ = ["MAX_BEAM_WIDTH", "BeamGroup", "BeamParams", "BeamResult", "BeamStepTrace"]

MAX_BEAM_WIDTH = 16


@dataclass(frozen=True)
class BeamParams:
    """A beam search request (our vLLM BeamSearchParams); early stopping is always on.

    beam_width: K in [2, MAX_BEAM_WIDTH] (transformers' num_beams = num_return_sequences = K).
    length_penalty: a finished beam scores sum_logprobs / generated_len ** length_penalty (any
    finite number; > 0 favours longer beams). max_tokens: tokens generated at most.
    Raises: ValueError if a field is out of its range."""

    beam_width: int = 4
    length_penalty: float = 1.0
    max_tokens: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "beam_width", as_int(self.beam_width, "beam_width", 2,
                                                      MAX_BEAM_WIDTH))
        object.__setattr__(self, "length_penalty", as_float(self.length_penalty, "length_penalty"))
        object.__setattr__(self, "max_tokens", as_int(self.max_tokens, "max_tokens", 1))


@dataclass
class BeamStepTrace(StepTrace):
    """A StepTrace plus what the beam tree did in the step.

    beams: after the step, best first (seq_id, parent, token, score, cached_token_count,
    token_ids). pruned: seq ids (their freed blocks are in blocks_freed). hypotheses: those
    finished this step (parent, token_ids, score). tables_read: the tables the model read.
    cow_skipped: the break-it's (seq_id, shared block) written without a copy. A group preempted
    as a whole gets a "preempt" trace: its beams in `preempted`, its blocks in blocks_freed."""

    beams: list[dict] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)
    hypotheses: list[dict] = field(default_factory=list)
    tables_read: dict[int, list[int]] = field(default_factory=dict)
    cow_skipped: list[tuple[int, int]] = field(default_factory=list)

    @property
    def blocks_shared(self) -> int:
        """Distinct physical blocks the beams' tables held when the model ran (with sharing)."""
        return len({b for t in self.tables_read.values() for b in t})

    @property
    def blocks_unshared(self) -> int:
        """Blocks the same beams would hold without sharing: every table its own."""
        return sum(len(t) for t in self.tables_read.values())


@dataclass
class BeamResult:
    """The K finished beams, best first, every step's trace, and the group's preemptions."""

    prompt_token_ids: list[int]
    beams: list[Hypothesis]
    traces: list[BeamStepTrace]
    preemptions: int = 0

    def memory(self) -> tuple[int, int]:
        """(blocks with sharing, blocks without) summed over the steps: KV memory x time.

        The paper's section 4.4 saving is 1 - the first / the second."""
        return (sum(t.blocks_shared for t in self.traces),
                sum(t.blocks_unshared for t in self.traces))


class BeamGroup:
    """One prompt's beams while the search runs: prefill, then one token per beam a step.

    Each step chooses, forks and prunes. Preempted as a whole: every beam's blocks are freed, its
    tokens and scores kept. Resumed by recompute: the prompt prefilled again, the beams forked from
    it again, each beam's generated tokens fed again in one step."""

    def __init__(self, search: BeamSearch, prompt_ids: list[int], params: BeamParams) -> None:
        self.search, self.params = search, params
        self.bm, self.runner = search.block_manager, search.runner
        self.beams: list[Sequence] = [search.new_seq(prompt_ids)]
        self.scores = torch.zeros(1, dtype=torch.float32)
        self.finished = Finished(params.beam_width)
        self.done = False
        # preempted: each beam's generated tokens, to resume from
        self.saved: list[list[int]] | None = None
        # resumed: the beams' generated tokens (all but the newest) are fed at the next step
        self.refeed = False
        self.preemptions = 0

    def _trace(self, phase: str, reason: str) -> BeamStepTrace:
        s = self.search
        trace = BeamStepTrace(step=s.step_count, phase=phase, reason=reason, kv_layout=s.kv_layout,
                              num_blocks=self.bm.num_blocks,
                              block_tables_before={b.seq_id: list(b.block_table)
                                                   for b in self.beams})
        s.step_count += 1
        return trace

    def step(self) -> BeamStepTrace:
        """One step: prefill (a chunk of) the prompt, re-feed after a resume, or decode each beam.

        A prefill's last chunk and a decode then choose, fork and prune."""
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
        """The slot for seq's newest token: append_slot (a new block, or a shared one copied).

        The break-it instead writes into a shared, partly filled last block, left shared."""
        last = seq.block_table[-1]
        if (self.search.skip_cow and not self.bm.needs_new_block(seq)
                and self.bm.ref_counts[last] > 1):
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
        """Resume after a preemption: fork the beams from the prompt again, give each its tokens."""
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
        """Recompute: each beam with 2+ generated tokens is fed all of them but the newest.

        The first gets its slot through append_slot (a new block, or a shared one copied)."""
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
                n = (head.num_uncached_tokens if budget is None
                     else min(budget, head.num_uncached_tokens))
                return bm.blocks_to_grow(head, head.cached_token_count + n)
            return 0 if bm.can_allocate(head, budget) else bm.num_blocks + 1  # allocate's own rule
        seqs = [s for s in self.beams if s.num_uncached_tokens > 1] if self.refeed else self.beams
        need = sum(bm.needs_new_block(s) for s in seqs)
        shared = Counter(s.block_table[-1] for s in seqs
                         if not bm.needs_new_block(s) and bm.ref_counts[s.block_table[-1]] > 1)
        # the last holder keeps it
        need += sum(h if bm.ref_counts[b] > h else h - 1 for b, h in shared.items())
        if self.refeed:  # the rest of the re-fed tokens
            need += sum(max(0, blocks_needed(s.num_tokens - 1, bm.block_size) - len(s.block_table)
                            - bm.needs_new_block(s)) for s in seqs)
        return need

    @property
    def holds_blocks(self) -> bool:
        return any(s.block_table for s in self.beams)

    def preempt(self) -> dict[int, list[int]]:
        """Preempt the whole group; returns seq id -> the blocks released.

        Tokens, scores and finished hypotheses are kept: the next steps prefill again and resume."""
        head = self.beams[0]
        # the beams exist (a group preempted mid-prompt restarts)
        if head.status is not SequenceStatus.WAITING:
            self.saved = [list(s.generated_token_ids) for s in self.beams]
        freed = {s.seq_id: self._release(s) for s in self.beams if s.block_table}
        self.beams = [self.search.new_seq(head.prompt_token_ids)]
        self.refeed = False
        self.preemptions += 1
        return freed

    def _run(self, trace: BeamStepTrace, seqs: list[Sequence],
             chunks: list[int] | None) -> torch.Tensor:
        """Run the model on `seqs`; returns the logits [len(seqs), vocab].

        First carries out the step's copies and records its new blocks. chunks: tokens fed each
        (default: all uncached)."""
        bm, runner = self.bm, self.runner
        trace.copies, bm.pending_copies = bm.pending_copies, []
        runner.copy_blocks(trace.copies)  # before anything is written
        trace.tables_read = {s.seq_id: list(s.block_table) for s in seqs}
        for s in seqs:
            before = trace.block_tables_before.get(s.seq_id, [])
            swapped = [b for b, a in zip(s.block_table, before) if b != a]
            # prefix-cache hits: reused
            hits = bm.last_hits.get(s.seq_id, []) if trace.phase == "prefill" else []
            grown = [b for i, b in enumerate(s.block_table[len(before):], len(before))
                     if not (i < len(hits) and hits[i])]
            if grown or swapped:
                trace.blocks_allocated[s.seq_id] = swapped + grown
        batch = runner.prepare(seqs, trace.phase == "prefill", chunks)
        logits = runner.run(seqs, batch)  # [B, vocab]
        trace.slot_mapping = batch.slot_mapping.tolist()
        at = 0
        for s, n, ctx in zip(seqs, batch.query_lens, batch.context_lens.tolist()):
            trace.seqs.append(SeqStepState(
                s.seq_id, s.token_ids[s.cached_token_count:s.cached_token_count + n],
                list(range(s.cached_token_count, s.cached_token_count + n)),
                trace.slot_mapping[at:at + n], ctx, None, cached_token_count=ctx,
                generated_len=len(s.generated_token_ids)))
            at += n
        return logits

    def _choose(self, logits: torch.Tensor, trace: BeamStepTrace) -> None:
        """Select the next beams: fork those chosen more than once, prune those chosen by none."""
        p = self.params
        histories = [list(s.generated_token_ids) for s in self.beams]
        last = len(histories[0]) + 1 >= p.max_tokens
        choices, entered = select(logits, self.scores, histories, self.finished,
                                  self.search.eos_ids, last,
                                  p.length_penalty)
        trace.hypotheses = [{"parent": self.beams[row].seq_id, "token_ids": h.token_ids,
                             "score": h.score}
                            for row, h in entered]
        self.done = last or self.finished.full
        if self.done:
            choices = []
        chosen = {c.parent for c in choices}
        # pruned (or, at the end, finished) first: their blocks free at once
        for row, seq in enumerate(self.beams):
            if row not in chosen:
                (trace.finished if self.done else trace.pruned).append(seq.seq_id)
                trace.blocks_freed[seq.seq_id] = self._release(seq)
        taken: set[int] = set()
        new_beams = []
        for c in choices:
            parent = self.beams[c.parent]
            seq = parent
            # a second child: fork from the parent before it takes its own token
            if c.parent in taken:
                seq = self.search.new_seq(parent.prompt_token_ids)
                self.bm.fork(parent, seq)
                self.runner.fork(parent.seq_id, seq.seq_id)
                seq.generated_token_ids = list(histories[c.parent])
                seq.cached_token_count, seq.status = (parent.cached_token_count,
                                                      SequenceStatus.RUNNING)
                trace.forked.setdefault(parent.seq_id, []).append(seq.seq_id)
            taken.add(c.parent)
            new_beams.append(seq)
            trace.beams.append({"seq_id": seq.seq_id, "parent": parent.seq_id, "token": c.token,
                                "score": c.score})
        # each beam knows one token more than it cached
        for seq, c, said in zip(new_beams, choices, trace.beams):
            seq.generated_token_ids.append(c.token)
            said.update(cached_token_count=seq.cached_token_count,
                        token_ids=list(seq.generated_token_ids))
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
        trace.block_tables_after = {s.seq_id: list(s.block_table) for s in self.beams
                                    if s.block_table}
        trace.running = [s.seq_id for s in self.beams] if not self.done else []
        trace.num_free_blocks = self.bm.num_free_blocks
        return trace
