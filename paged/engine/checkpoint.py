"""StepCheckpoint: what one engine step may change, captured so a step that raises is undone.

A step touches the scheduler's queues, the block manager (tables, ref counts, free list,
prefix-cache index), the sequences (cached_token_count, generated_token_ids, status, …), their
samplers' random state, the forked children, the contiguous twin's caches and the step counter.
`StepCheckpoint(engine)` copies what belongs to live requests (their fields and block tables:
bounded by the batch, not the pool) and opens an undo journal on the pool-sized structures (the free
queue, the ref counts, the prefix-cache index): each change the step makes records its inverse, so
the checkpoint costs what the step changes, not what the pool holds (vLLM's free queue is a doubly
linked list for the same reason). `restore()` puts everything back, with two exceptions, both about
K/V that the failed step may already have overwritten in the pool:

- a sequence the step preempted stays preempted (blocks freed, back at the front of the waiting
  queue): its blocks may have been handed to another sequence and written, so its cache is gone and
  it must be recomputed anyway;
- a cached block (prefix caching) that the step took for new contents loses its hash, since the
  contents it was indexed under may have been overwritten.

Every other byte the step wrote into the pool lies beyond some sequence's cached_token_count, i.e.
in slots that nothing reads until they are written again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..sequence import Sequence
from .swapping import swapped_seqs

if TYPE_CHECKING:
    from .engine import LLMEngine


class EngineStepError(RuntimeError):
    """A step raised and was rolled back (LLMEngine.step); the engine stays usable.

    step: the step that failed. seq_ids: the sequences it had scheduled ([] if scheduling failed).
    ended_request: the request to blame, ended with finish_reason "error", or None.
    """

    def __init__(self, message: str, step: int, seq_ids: list[int],
                 ended_request: int | None) -> None:
        super().__init__(message)
        self.step, self.seq_ids, self.ended_request = step, seq_ids, ended_request


class SequenceFailure(Exception):
    """Raised inside a step when one sequence is to blame (its logits, its sampling)."""

    def __init__(self, seq: Sequence, what: str) -> None:
        super().__init__(what)
        self.seq, self.what = seq, what



class JournaledCounts(list):
    """The block manager's ref counts [num_blocks] that journal their changes: undone in O(changes).

    While `journal` is a dict, each index's value is saved there before its first change."""

    journal: dict[int, int] | None = None

    def __setitem__(self, index, value) -> None:
        journal = self.journal
        if journal is not None:
            for i in (range(*index.indices(len(self))) if isinstance(index, slice) else (index,)):
                journal.setdefault(i, list.__getitem__(self, i))
        list.__setitem__(self, index, value)

    def undo(self) -> None:
        """Put back every saved value and stop journalling."""
        journal, self.journal = self.journal or {}, None
        for i, value in journal.items():
            list.__setitem__(self, i, value)


def journal_ref_counts(block_manager) -> None:
    """Make the block manager's ref counts a JournaledCounts (an O(pool) copy, once).

    LLMEngine does it when it is built, so no step pays it."""
    if type(block_manager.ref_counts) is not JournaledCounts:
        block_manager.ref_counts = JournaledCounts(block_manager.ref_counts)


class StepCheckpoint:
    """What a step may change: live state copied before it, pool-sized structures journalled.

    Only unfinished sequences and their tables are copied (a step never touches a finished
    request), so the cost grows with neither the requests served so far nor the pool.
    Call `close()` after a step that succeeded, `restore()` after one that raised."""

    def __init__(self, engine: "LLMEngine") -> None:
        bm, sched = engine.block_manager, engine.scheduler
        self.engine = engine
        self.waiting, self.running = list(sched.waiting), list(sched.running)
        # every unfinished sequence is queued or running
        live = self.running + self.waiting + swapped_seqs(sched)
        self.swap = sched.swapper.snapshot() if sched.swapper else None
        self.seqs = [(s, s.cached_token_count, len(s.generated_token_ids), s.status,
                      s.finish_reason, s.preemptions,
                      s.n) for s in live]
        # a greedy sequence never draws from its generator; a sampling one draws once per step
        self.generators = [(s.generator, s.generator.get_state()) for s in live
                           if not s.params.greedy]
        self.tables = {sid: list(t) for sid, t in bm.tables.items()}
        journal_ref_counts(bm)
        bm.ref_counts.journal = {}
        bm.free_block_ids.start_journal()
        bm.cache.start_journal()
        self.live_ids = [s.seq_id for s in live]
        self.freed = bm._freed.intersection(self.live_ids)
        self.last_hits = dict(bm.last_hits)
        self.pending_copies = list(bm.pending_copies)
        # a step adds no request; it may fork children (new seq ids) into the group of a sequence
        # that still forks (n > 1: forking sets it to 1), so only those groups' sizes are kept
        self.group_sizes = {s.request_id: len(engine.groups[s.request_id]) for s in live if s.n > 1}
        # the live sequences' logits rows (record=True); restore drops the rows of the others
        last = engine.last_logits
        self.logits = {sid: last[sid] for sid in self.live_ids if sid in last} if last else {}
        self.next_id, self.step_count = engine._next_id, engine.step_count
        hook = engine.runner.hook  # a fault's hook keeps the rows it wrote (None: no fault)
        self.contiguous, self.rows = (dict(engine.runner.contiguous),
                                      [list(r) for r in hook.rows] if hook else None)

    def close(self) -> None:
        """The step succeeded: stop journalling (the journals are dropped)."""
        bm = self.engine.block_manager
        bm.ref_counts.journal = None
        bm.free_block_ids.stop_journal()
        bm.cache.stop_journal()

    def restore(self) -> list[int]:
        """Undo everything since the checkpoint (but the two exceptions above).

        Returns the seq ids that stay preempted."""
        engine = self.engine
        bm, sched = engine.block_manager, engine.scheduler
        was_running = {s.seq_id for s in self.running}
        # preemption
        preempted = [s for s in [*sched.waiting, *swapped_seqs(sched)] if s.seq_id in was_running]
        for seq, cached, generated, status, finish_reason, preemptions, n in self.seqs:
            seq.cached_token_count, seq.status, seq.finish_reason = cached, status, finish_reason
            # the other bookkeeping fields are set once, at creation
            seq.preemptions, seq.n = preemptions, n
            del seq.generated_token_ids[generated:]
            seq.block_table = []
        for generator, state in self.generators:
            generator.set_state(state)
        # forked children
        born = [sid for sid in range(self.next_id, engine._next_id) if sid in engine.sequences]
        bm.tables = {}
        # a table is one list object shared by the manager and its sequence
        for sid, table in self.tables.items():
            bm.tables[sid] = list(table)
            if sid in engine.sequences:
                engine.sequences[sid].block_table = bm.tables[sid]
        bm.free_block_ids.undo()  # the same blocks in the same order
        bm.ref_counts.undo()
        bm.cache.undo()  # but a cached block the step took for new contents stays evicted
        bm._freed.difference_update(self.live_ids + born)
        bm._freed.update(self.freed)
        bm.last_hits, bm.pending_copies = self.last_hits, self.pending_copies
        sched.waiting.clear()
        sched.waiting.extend(self.waiting)
        sched.running[:] = self.running
        # a sequence the step swapped out is recomputed below: its pool blocks may be overwritten
        if self.swap:
            sched.swapper.restore(self.swap)
        for sid in born:
            del engine.sequences[sid]
            engine.last_logits.pop(sid, None)
        for rid, size in self.group_sizes.items():
            del engine.groups[rid][size:]
        for sid in self.live_ids:
            logits = self.logits.get(sid)
            if logits is None:
                engine.last_logits.pop(sid, None)
            else:
                engine.last_logits[sid] = logits
        engine._next_id, engine.step_count = self.next_id, self.step_count
        engine.runner.contiguous = self.contiguous
        if engine.runner.hook:
            engine.runner.hook.rows = self.rows
        # the step preempted them in this order; their caches may be overwritten
        for seq in reversed(preempted):
            self._preempt(seq)
        return [s.seq_id for s in preempted]

    def _preempt(self, seq: Sequence) -> None:
        engine = self.engine
        engine.scheduler.preempt(seq, allow_swap=False)
        seq.preemptions += 1
        engine.runner.release(seq.seq_id)
