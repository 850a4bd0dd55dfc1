"""The Scheduler: who runs this step, within the token, sequence and block budgets.

Each step is either a prefill batch (new or preempted prompts, first come first served) or a decode batch (one
token for every running sequence). Prefill goes first whenever a waiting prompt fits, as in vLLM's original
scheduler. When decode cannot get a slot for some sequence, the newest running sequence is preempted by recompute:
its blocks are freed, its cache forgotten, and it goes back to the front of the waiting queue.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..block_manager import BlockManager
from ..config import SchedulerConfig
from ..sequence import Sequence, SequenceStatus


@dataclass
class SchedulerOutput:
    """What one step will run, and why."""

    phase: str  # "prefill", "decode" or "idle"
    seqs: list[Sequence]
    reason: str
    preempted: list[int] = field(default_factory=list)
    allocated: dict[int, list[int]] = field(default_factory=dict)  # seq_id -> blocks newly taken this step
    freed: dict[int, list[int]] = field(default_factory=dict)  # seq_id -> blocks released by preemption


class Scheduler:
    def __init__(self, config: SchedulerConfig, block_manager: BlockManager) -> None:
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> SchedulerOutput:
        out = self._schedule_prefill()
        return out if out is not None else self._schedule_decode()

    def _schedule_prefill(self) -> SchedulerOutput | None:
        bm, cfg = self.block_manager, self.config
        batch, tokens, why_stop = [], 0, ""
        while self.waiting:
            seq = self.waiting[0]
            n = seq.num_uncached_tokens
            group = seq.extra.get("n", 1) if not seq.generated_token_ids else 1  # parallel samples fork after prefill
            if len(self.running) + len(batch) + group > cfg.max_num_seqs:
                why_stop = f"max_num_seqs {cfg.max_num_seqs} reached"
                break
            if tokens + n > cfg.max_num_batched_tokens:
                why_stop = f"seq {seq.seq_id} ({n} tokens) would pass max_num_batched_tokens {cfg.max_num_batched_tokens}"
                break
            if not bm.can_allocate(seq):
                why_stop = (f"seq {seq.seq_id} needs {seq.blocks_needed(bm.block_size)} blocks, "
                            f"{bm.num_free_blocks} free (watermark {bm.watermark_blocks})")
                break
            self.waiting.popleft()
            bm.allocate(seq)
            seq.status = SequenceStatus.RUNNING
            batch.append(seq)
            tokens += n
        if not batch:
            if self.waiting and not self.running:
                # Nothing runs and the head of the queue cannot start: only possible if admission checks failed.
                raise RuntimeError(f"scheduler stuck: {why_stop}")
            return None
        self.running.extend(batch)
        reason = f"prefill {len(batch)} waiting prompt(s), {tokens} tokens"
        if why_stop:
            reason += f"; stopped: {why_stop}"
        return SchedulerOutput("prefill", batch, reason, allocated={s.seq_id: list(s.block_table) for s in batch})

    def _schedule_decode(self) -> SchedulerOutput:
        if not self.running:
            return SchedulerOutput("idle", [], "nothing to run")
        bm = self.block_manager
        preempted, freed = [], {}
        # Make room: while some running sequence needs a block the pool cannot give, preempt the newest.
        while sum(bm.append_needs_block(s) for s in self.running) > bm.num_free_blocks:
            victim = self.running.pop()
            freed[victim.seq_id] = bm.free(victim)
            victim.reset_for_recompute()
            self.waiting.appendleft(victim)
            preempted.append(victim.seq_id)
        allocated = {}
        for seq in self.running:
            before = list(seq.block_table)
            bm.append_slot(seq)
            if seq.block_table != before:  # a new block, or a copy-on-write replacement of the last one
                allocated[seq.seq_id] = [b for b in seq.block_table if b not in before]
        reason = f"decode {len(self.running)} running sequence(s), one token each"
        if allocated:
            reason += f"; {len(allocated)} took a new block (last block full or shared)"
        if preempted:
            reason += f"; preempted {preempted} by recompute (pool full)"
        if not self.running:
            return SchedulerOutput("idle", [], reason, preempted, {}, freed)
        return SchedulerOutput("decode", list(self.running), reason, preempted, allocated, freed)

    def finish(self, seq: Sequence) -> list[int]:
        """Remove a finished (or aborted) sequence and free its blocks."""
        released = []
        if seq in self.running:
            self.running.remove(seq)
            released = self.block_manager.free(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
            if seq.seq_id in self.block_manager.tables:
                released = self.block_manager.free(seq)
        seq.status = SequenceStatus.FINISHED
        return released
