"""The Scheduler: who runs this step, within the token, sequence and block budgets.

Each step is either a prefill batch (new or preempted prompts, first come first served) or a decode
batch (one token for every running sequence). Prefill goes first whenever a waiting prompt fits, as
in vLLM's original scheduler. When decode cannot get a slot for some sequence, the newest running
sequence is preempted by recompute: its blocks are freed, its cache forgotten, and it goes back to
the front of the waiting queue.

With SchedulerConfig(enable_chunked_prefill=True) there are no phases (vLLM v1): a step feeds every
running sequence its uncached tokens (1 for a decode, a chunk for a prompt still prefilling), then
waiting prompts a chunk, all within max_num_batched_tokens; the phase is "mixed" when decodes and
prompt chunks share the step.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..block_manager import BlockManager
from ..config import SchedulerConfig
from ..sequence import Sequence, SequenceStatus
from .swapping import make_swapper


# Why a step runs what it runs, as (code, values) pieces: a UI translates each code (ui.strings,
# "engine.why_<code>"), `explain` writes them in English for logs, the CLI and
# `SchedulerOutput.reason`.
WHY_ENGLISH = {
    "prefill": "prefill {count} waiting prompt(s), {tokens} tokens",
    "prefill_chunk": "prefill chunk of seq {seq}: tokens {start}–{end} of {total}",
    "stop_max_seqs": "stopped: max_num_seqs {max_num_seqs} reached",
    "stop_decode_budget": "stopped: {seats} running would pass max_num_batched_tokens {budget} in "
                          "a decode step",
    "stop_tokens": "stopped: seq {seq} ({tokens} tokens) would pass max_num_batched_tokens "
                   "{budget}",
    "stop_blocks": "stopped: seq {seq} needs {need} blocks, {free} free (watermark {watermark})",
    "idle": "nothing to run",
    "decode": "decode {count} running sequence(s), one token each",
    "new_blocks": "{count} took a new block (last block full or shared)",
    "preempted": "preempted {seqs} by recompute (pool full)",
    "swapped_out": "swapped out {seqs} to the swap pool ({blocks} blocks copied, pool full)",
    "swapped_in": "swapped in {seqs} from the swap pool ({blocks} blocks copied back)",
    "swap_full": "swap pool full: seq {seq} needs {need} swap blocks, {free} of {swap_space} free, "
                 "so it is recomputed",
    "swap_too_small": ("swap pool too small: seq {seq} needs {need} swap blocks, more than all "
                       "{swap_space} it has, so it is recomputed"),
    "swap_wait": "waiting prompts wait: {count} sequence(s) in the swap pool come back first",
}
Why = list[tuple[str, dict]]


def explain(why: Why, templates: dict[str, str] = WHY_ENGLISH) -> str:
    """The pieces of a step's why, filled into `templates` (code -> format), joined with "; "."""
    return "; ".join(templates[code].format(**values) for code, values in why)


def seats(seqs) -> int:
    """How many sequences these will be once running (a max_num_seqs count).

    A prompt with n parallel samples forks into n after its prefill (until then it is one Sequence
    with n > 1 and no generated token), so it takes n seats."""
    return sum(seq.n if not seq.generated_token_ids else 1 for seq in seqs)


@dataclass
class SchedulerOutput:
    """What one step will run, and why."""

    # "prefill", "decode", "mixed" (chunked prefill: decodes and prompt chunks) or "idle"
    phase: str
    seqs: list[Sequence]
    why: Why
    preempted: list[int] = field(default_factory=list)
    # seq_id -> blocks newly taken this step
    allocated: dict[int, list[int]] = field(default_factory=dict)
    # seq_id -> blocks released by preemption
    freed: dict[int, list[int]] = field(default_factory=dict)
    # Chunked prefill: seq_id -> tokens fed this step (fewer than its uncached ones for a non-final
    # prompt chunk). Empty when chunked prefill is off: every scheduled sequence is fed all its
    # uncached tokens.
    num_tokens: dict[int, int] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        return explain(self.why)


class Scheduler:
    def __init__(self, config: SchedulerConfig, block_manager: BlockManager) -> None:
        self.config = config
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        # preemption_mode="swap" only (swapping.py); None: recompute
        self.swapper = make_swapper(self)

    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running or (self.swapper and self.swapper.swapped))

    def schedule(self) -> SchedulerOutput:
        if self.config.enable_chunked_prefill:
            return self._schedule_chunked()
        if self.swapper is not None:
            return self.swapper.schedule()
        out = self._schedule_prefill()
        return out if out is not None else self._schedule_decode()

    def _schedule_prefill(self) -> SchedulerOutput | None:
        bm, cfg = self.block_manager, self.config
        batch, tokens, why_stop = [], 0, None
        while self.waiting:
            seq = self.waiting[0]
            n = seq.num_uncached_tokens
            taken = seats(self.running) + seats(batch) + seats([seq])
            if taken > cfg.max_num_seqs:
                why_stop = ("stop_max_seqs", dict(max_num_seqs=cfg.max_num_seqs))
                break
            # the next decode step feeds one token per running sequence
            if taken > cfg.max_num_batched_tokens:
                why_stop = ("stop_decode_budget", dict(seats=taken,
                                                       budget=cfg.max_num_batched_tokens))
                break
            if tokens + n > cfg.max_num_batched_tokens:
                why_stop = ("stop_tokens", dict(seq=seq.seq_id, tokens=n,
                                                budget=cfg.max_num_batched_tokens))
                break
            if not bm.can_allocate(seq):
                why_stop = ("stop_blocks", dict(seq=seq.seq_id,
                                                need=seq.blocks_needed(bm.block_size),
                                                free=bm.num_free_blocks,
                                                watermark=bm.watermark_blocks))
                break
            self.waiting.popleft()
            bm.allocate(seq)
            seq.status = SequenceStatus.RUNNING
            batch.append(seq)
            tokens += n
        if not batch:
            if self.waiting and not self.running:
                # Nothing runs and the head of the queue cannot start: only possible if admission
                # checks failed.
                raise RuntimeError("scheduler stuck: "
                                   f"{explain([why_stop]) if why_stop else 'empty batch'}")
            return None
        self.running.extend(batch)
        why = ([("prefill", dict(count=len(batch), tokens=tokens))]
               + ([why_stop] if why_stop else []))
        return SchedulerOutput("prefill", batch, why,
                               allocated={s.seq_id: list(s.block_table) for s in batch})

    def _schedule_decode(self) -> SchedulerOutput:
        if not self.running:
            return SchedulerOutput("idle", [], [("idle", {})])
        bm = self.block_manager
        preempted, freed = [], {}
        # Make room: while some running sequence needs a block the pool cannot give, preempt the
        # newest.
        needs = bm.append_needs_blocks(self.running)
        while sum(needs) > bm.num_free_blocks:
            victim = self.running[-1]
            freed[victim.seq_id] = self.preempt(victim)
            preempted.append(victim.seq_id)
            # freeing may unshare a sibling's last block
            needs = bm.append_needs_blocks(self.running)
        allocated = {}
        # Most steps a sequence's next token fits its own last block: nothing to take, so
        # append_slot (which would only work out the slot again, the runner does that) is called
        # only for the others. Asked again just before: a copy-on-write may have unshared a
        # sibling's last block (taking a free block never makes a need).
        for seq, need in zip(self.running, needs):
            if need and bm.append_needs_block(seq):
                # appends a block, or replaces a shared last one (copy-on-write)
                bm.append_slot(seq)
                allocated[seq.seq_id] = [seq.block_table[-1]]
            # prefix caching: this step fills seq's block: hash it now (as vLLM v1)
            elif bm.fills_block(seq):
                bm.append_slot(seq)
        why = [("decode", dict(count=len(self.running)))]
        if allocated:
            why.append(("new_blocks", dict(count=len(allocated))))
        if preempted:
            why.append(("preempted", dict(seqs=list(preempted))))
        if not self.running:
            return SchedulerOutput("idle", [], why, preempted, {}, freed)
        return SchedulerOutput("decode", list(self.running), why, preempted, allocated, freed)

    def _schedule_chunked(self) -> SchedulerOutput:
        """One chunked step, vLLM v1 style (step for step as vLLM 0.32's v1 Scheduler).

        Running sequences first (oldest first), each fed min(uncached tokens, budget left); then
        waiting prompts get a chunk of the rest, admitted only when their whole prompt fits. The
        newest running sequence is preempted when a block is missing; no prompt is admitted in a
        step that preempted."""
        bm, cfg = self.block_manager, self.config
        budget = cfg.max_num_batched_tokens
        batch, chunks, allocated, freed, preempted = [], {}, {}, {}, []
        decodes = grown = 0
        pieces: Why = []  # prompt chunks, each told by its own "prefill_chunk" piece
        # waiting prompts fed whole in this step, told together by "prefill"
        whole = whole_tokens = 0
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_uncached_tokens, budget)
            need = (int(bm.append_needs_block(seq)) if n == 1
                    else bm.blocks_to_grow(seq, seq.cached_token_count + n))
            # make room: preempt the newest running sequence (maybe seq itself)
            while need > bm.num_free_blocks:
                victim = self.running[-1]
                freed[victim.seq_id] = self.preempt(victim)
                preempted.append(victim.seq_id)
                if victim is seq:
                    break
            if seq.status is not SequenceStatus.RUNNING:
                break
            before = list(seq.block_table)
            if n == 1:
                bm.append_slot(seq)
            else:
                bm.ensure_capacity(seq, seq.cached_token_count + n)
            # a new block, or a copy-on-write replacement of the last one
            if seq.block_table != before:
                allocated[seq.seq_id] = [b for b in seq.block_table if b not in before]
                grown += 1
            is_decode = bool(seq.generated_token_ids) and seq.num_uncached_tokens == 1
            decodes += is_decode
            # a prompt started in an earlier step: this is one of its later chunks
            if not is_decode:
                pieces.append(self._chunk_why(seq, n))
            batch.append(seq)
            chunks[seq.seq_id] = n
            budget -= n
            i += 1
        why_stop = None
        while self.waiting and budget > 0 and not preempted:
            seq = self.waiting[0]
            if seats(self.running) + seats([seq]) > cfg.max_num_seqs:
                why_stop = ("stop_max_seqs", dict(max_num_seqs=cfg.max_num_seqs))
                break
            # Admitted only if its whole prompt fits (vLLM 0.32's default,
            # scheduler_reserve_full_isl), though only a chunk's blocks are taken now: a prompt
            # admitted on its first chunk alone would preempt others later.
            if not bm.can_allocate(seq):
                why_stop = ("stop_blocks", dict(seq=seq.seq_id, need=bm._blocks_to_take(seq),
                                                free=bm.num_free_blocks,
                                                watermark=bm.watermark_blocks))
                break
            self.waiting.popleft()
            allocated[seq.seq_id] = list(bm.allocate(seq, max_new_tokens=budget))
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            n = min(seq.num_uncached_tokens, budget)
            if n < seq.num_uncached_tokens:
                pieces.append(self._chunk_why(seq, n))
            else:
                whole, whole_tokens = whole + 1, whole_tokens + n
            batch.append(seq)
            chunks[seq.seq_id] = n
            budget -= n
        if not batch:
            if self.waiting and not self.running:
                raise RuntimeError("scheduler stuck: "
                                   f"{explain([why_stop]) if why_stop else 'empty batch'}")
            why = [("idle", {})] + ([("preempted", dict(seqs=list(preempted)))] if preempted
                                    else [])
            return SchedulerOutput("idle", [], why, preempted, {}, freed)
        phase = "decode" if decodes == len(batch) else "prefill" if decodes == 0 else "mixed"
        # Whole prompts as "prefill", each part of a longer prompt as "prefill_chunk", 1-token
        # decodes as "decode".
        why = [("prefill", dict(count=whole, tokens=whole_tokens))] if whole else []
        why += pieces
        if decodes:
            why.append(("decode", dict(count=decodes)))
        if grown:
            why.append(("new_blocks", dict(count=grown)))
        why += [w for w in [why_stop] if w]
        if preempted:
            why.append(("preempted", dict(seqs=list(preempted))))
        return SchedulerOutput(phase, batch, why, preempted, allocated, freed, chunks)

    @staticmethod
    def _chunk_why(seq: Sequence, n: int) -> tuple[str, dict]:
        """The "prefill_chunk" piece of `seq` fed `n` tokens from its cached_token_count on.

        It names the token indexes, both ends included, out of its num_tokens."""
        start = seq.cached_token_count
        return ("prefill_chunk", dict(seq=seq.seq_id, start=start, end=start + n - 1,
                                      total=seq.num_tokens))

    def preempt(self, seq: Sequence, allow_swap: bool = True) -> list[int]:
        """Preempt by recompute: free seq's blocks, forget its cache, requeue it first.

        Returns the blocks released. In swap mode (allow_swap) the swapper swaps it out instead
        if it can."""
        if (allow_swap and self.swapper is not None
                and (released := self.swapper.preempt(seq)) is not None):
            return released
        self.running.remove(seq)
        released = self.block_manager.free(seq)
        seq.reset_for_recompute()
        self.waiting.appendleft(seq)
        return released

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
        elif self.swapper is not None and self.swapper.holds(seq):
            self.swapper.drop(seq)
        seq.status = SequenceStatus.FINISHED
        return released
