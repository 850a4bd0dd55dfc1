"""Speculative decoding in the engine: propose, verify in one pass, accept, roll back.

The math is chapters/speculative.py.

LLMEngine hands every decode step to `SpeculativeDecoder.step` when SchedulerConfig(speculative=...)
is set. The scheduler has already run as for a plain decode (preemptions, a new block or
copy-on-write for each sequence's next token); then, per sequence, in the order the scheduler ran
them:

1. propose: up to k guesses, greedy sequences only (acceptance by argmax is exact only for
   them; a sampling one is fed its one token as usual). Clipped by the token budget
   (max_num_batched_tokens counts the k + 1 fed tokens), max_tokens, the model's length and the
   free blocks: guesses take free blocks, never preempt anyone;
2. take blocks for them (BlockManager.ensure_capacity: the slots after the last known token's);
3. one forward pass over every sequence's last known token + its guesses
   (paged_attention_prefill: causal inside the new tokens, history through the block table; the
   contiguous twin appends to its own cache);
4. greedy acceptance (paged.chapters.speculative.accept_greedy): the emitted tokens appended one
   by one, each checked against the stop rules (EOS / stop / max_tokens), so nothing after a stop
   is kept;
5. roll back: cached_token_count = num_tokens - 1 (the state rule, as after a plain decode). The
   K/V written for rejected guesses stay in their slots, unread, until later tokens overwrite
   them; blocks holding only rejected slots go back to the free queue (its head: unhashed), so
   the table is blocks_needed(cached_token_count) long, exactly what plain decoding would hold.
   vLLM 0.32 keeps those blocks for the next step instead. With prefix caching, the blocks the
   accepted tokens filled are hashed now (never a block holding a guess).

If no sequence got a guess, the step is left to the plain decode path (the same tokens, the decode
kernel). `rollback=False` is the break-it: cached_token_count counts every fed token, rejected
guesses included, so later tokens are written after stale K/V and read it as history; the contiguous
twin (correct) shows the drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from ..addressing import (PAD_SLOT, batch_slot_mapping, block_tables, blocks_needed,
                          validate_block_tables)
from ..batch import BatchInput
from ..sequence import Sequence
from ..chapters.speculative import SpeculativeConfig, accept_greedy, ngram_propose
from .checkpoint import SequenceFailure
from .recording import StepRecorder
from .sampler import argmax_rows, sample_one

if TYPE_CHECKING:
    from .engine import LLMEngine
    from .scheduler import SchedulerOutput
    from .trace import StepTrace


class SpeculativeDecoder:
    """One engine's speculation: its proposer, the break-it flag and the counts per request.

    proposer(seq, k) -> at most k guessed token ids (default: prompt lookup with the config's
    n-gram lengths; tests put in their own). stats: request id -> {"num_proposed",
    "num_accepted", "num_passes"} (guesses made, kept, verification passes that fed guesses)."""

    def __init__(self, engine: "LLMEngine", config: SpeculativeConfig) -> None:
        self.engine, self.config = engine, config
        self.proposer: Callable[[Sequence, int], list[int]] = self.ngram
        self.rollback = True
        self.stats: dict[int, dict[str, int]] = {}

    @classmethod
    def for_engine(cls, engine: "LLMEngine") -> "SpeculativeDecoder | None":
        """The engine's decoder (None when speculation is off).

        Raises: ValueError with a fault (faults rebuild a plain step's inputs, not a pass's)."""
        config = engine.scheduler_config.speculative
        if config is None:
            return None
        if engine.fault is not None:
            raise ValueError("faults are injected without speculative decoding; set "
                             "speculative=None")
        if getattr(engine.model.config, "sliding_window", None):
            raise ValueError("speculative decoding with a sliding window is not supported (the "
                             "verification pass reads the whole history); set speculative=None or "
                             "use a model without a window")
        return cls(engine, config)

    def ngram(self, seq: Sequence, k: int) -> list[int]:
        cfg = self.config
        return ngram_propose(seq.token_ids, k, cfg.prompt_lookup_min, cfg.prompt_lookup_max,
                             self.engine.model.config.max_position_embeddings)

    def request_stats(self, request_id: int) -> dict[str, int]:
        return self.stats.setdefault(request_id, {"num_proposed": 0, "num_accepted": 0,
                                                  "num_passes": 0})

    # --- one step ---------------------------------------------------------------------------------
    def _propose(self, seqs: list[Sequence]) -> list[list[int]]:
        """Each sequence's guesses, within the budgets (module docstring, 1)."""
        engine, bm = self.engine, self.engine.block_manager
        # one fed token each is already counted
        budget = engine.scheduler_config.max_num_batched_tokens - len(seqs)
        max_len = engine.model.config.max_position_embeddings
        out, free = [], bm.num_free_blocks  # free: what the guesses of the sequences before left
        for seq in seqs:
            # the last known token's cache index (plain decode: num_tokens - 1)
            start = seq.cached_token_count
            k = min(self.config.k, budget, seq.params.max_tokens - len(seq.generated_token_ids) - 1,
                    max_len - start - 1, (len(seq.block_table) + free) * bm.block_size - start - 1)
            guesses = [int(t) for t in self.proposer(seq,
                                                     k)][:k] if k > 0 and seq.params.greedy else []
            budget -= len(guesses)
            free -= bm.blocks_to_grow(seq, start + 1 + len(guesses))
            out.append(guesses)
        return out

    def _batch(self, seqs: list[Sequence], fed: list[list[int]]) -> BatchInput:
        """The verification pass's inputs: each sequence's tokens from cached_token_count on."""
        runner = self.engine.runner
        starts = [s.cached_token_count for s in seqs]
        lens = torch.tensor([len(f) for f in fed], dtype=torch.long)
        # [N] batch row of each fed token
        rows = torch.repeat_interleave(torch.arange(len(seqs)), lens)
        first = torch.cumsum(lens, 0) - lens
        positions = (torch.tensor(starts, dtype=torch.long)[rows]
                     + torch.arange(int(lens.sum())) - first[rows])
        paged = runner.pool is not None
        padded = (block_tables([s.block_table for s in seqs]) if paged
                  else torch.zeros(len(seqs), 1, dtype=torch.int32))
        slots = (batch_slot_mapping(padded, rows, positions, runner.block_size) if paged
                 else torch.full((len(positions),), PAD_SLOT, dtype=torch.long))
        device = runner.device
        batch = BatchInput(is_prefill=True, seq_ids=[s.seq_id for s in seqs],
                           input_ids=torch.tensor([t for f in fed for t in f], dtype=torch.long,
                                                  device=device),
                           positions=positions.to(device), slot_mapping=slots.to(device),
                           block_tables=padded.to(device),
                           context_lens=torch.tensor([a + len(f) for a, f in zip(starts, fed)],
                                                     device=device),
                           query_lens=lens.tolist(), chunked=True)
        if not paged:
            return batch
        tables = [s.block_table for s in seqs]
        if runner.hook:  # a fault rebuilds the inputs through the links it breaks
            return runner.hook.apply(batch, tables, runner.num_blocks)
        validate_block_tables(batch.block_tables, batch.context_lens, runner.num_blocks,
                              runner.block_size, tables)
        return batch

    @torch.inference_mode()
    def _forward(self, seqs: list[Sequence], batch: BatchInput) -> torch.Tensor:
        """Logits of every fed token: [N, vocab]."""
        runner = self.engine.runner
        return runner.model(batch.input_ids, batch.positions,
                            backend=runner.backend(seqs, batch)).float()

    def step(self, sched: "SchedulerOutput", trace: "StepTrace") -> bool:
        """Run this decode step speculatively; False (nothing done) leaves it to the plain path.

        That is when it is not a decode step, or no sequence got a guess (with rollback on)."""
        if sched.phase != "decode":
            return False
        engine, bm, seqs = self.engine, self.engine.block_manager, sched.seqs
        guesses = self._propose(seqs)
        if self.rollback and not any(guesses):
            return False
        taken = [bm.ensure_capacity(s, s.cached_token_count + 1 + len(g))
                 for s, g in zip(seqs, guesses)]
        fed = [[s.last_token_id] + g for s, g in zip(seqs, guesses)]
        batch = self._batch(seqs, fed)
        logits = self._forward(seqs, batch)
        last_rows, records = [], []
        for i, (seq, g) in enumerate(zip(seqs, guesses)):
            start, n = batch.starts[i], batch.query_lens[i]
            rows = logits[start:start + n]
            if not torch.isfinite(rows).all():
                raise SequenceFailure(seq, "the model's logits hold NaN or inf")
            targets = argmax_rows(rows) if seq.params.greedy else [sample_one(seq, rows[0])]
            accepted = accept_greedy(g, targets)
            kept = self._emit(seq, targets[:accepted + 1], trace)
            records.append((i, seq, self._roll_back(seq, n, kept), g, min(accepted, kept),
                            targets[:kept]))
            last_rows.append(rows[kept - 1])
        engine.free_finished(trace)
        if engine.record:
            recorder = StepRecorder(trace, batch, torch.stack(last_rows), engine.tokenizer.decode,
                                    engine.last_logits, engine.sequences)
        for (i, seq, freed, g, accepted, emitted), new in zip(records, taken):
            slots = trace.slot_mapping[batch.starts[i]:batch.starts[i] + batch.query_lens[i]]
            trace.speculative[seq.seq_id] = dict(proposed=g, accepted=accepted, emitted=emitted,
                                                 slots=slots,
                                                 discarded_slots=slots[len(emitted):]
                                                 if self.rollback else [],
                                                 blocks_taken=new, blocks_freed=freed)
            stats = self.request_stats(seq.request_id)
            stats["num_proposed"] += len(g)
            stats["num_accepted"] += accepted
            stats["num_passes"] += bool(g)
            if engine.record:
                recorder.add(i, seq, emitted[-1])
        return True

    def _emit(self, seq: Sequence, tokens: list[int], trace: "StepTrace") -> int:
        """Append the accepted tokens and the model's own one; returns how many were kept.

        Stops at the first that ends the request (EOS, stop string, max_tokens: trace.finished)."""
        for kept, tok in enumerate(tokens, 1):
            seq.generated_token_ids.append(int(tok))
            reason = self.engine.stop_reason(seq)
            if reason is not None:
                seq.finish_reason = reason
                trace.finished.append(seq.seq_id)
                return kept
        return len(tokens)

    def _roll_back(self, seq: Sequence, fed: int, kept: int) -> list[int]:
        """Roll seq back to its kept tokens; returns the blocks freed (last first).

        cached_token_count goes back to num_tokens - 1 and the table to
        blocks_needed(cached_token_count). rollback=False (the break-it): every fed token counts as
        cached, nothing is freed or hashed."""
        bm = self.engine.block_manager
        if not self.rollback:
            seq.cached_token_count += fed
            return []
        seq.cached_token_count += kept
        assert seq.cached_token_count == seq.num_tokens - 1, (
            "after a decode exactly the newest token is uncached")
        # prefix caching: hash the blocks the kept tokens filled
        bm._file(seq, seq.cached_token_count)
        freed = []
        while len(seq.block_table) > blocks_needed(seq.cached_token_count, bm.block_size):
            # seq.block_table is the block manager's own list (bm.tables)
            block = seq.block_table.pop()
            bm.ref_counts[block] -= 1
            assert bm.ref_counts[block] == 0, (
                f"block {block} held only rejected guesses, yet it is shared")
            freed.append(block)
        bm.free_block_ids.release(freed, bm.cache.block_hash)
        return freed
