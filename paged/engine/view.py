"""EngineView: the engine's state after a step, as plain immutable values, built on demand.

A page or a lesson draws the pool, the queues and the state rule from a view and from the step's
StepTrace, never from the engine's internals (block manager tables, scheduler queues, Sequence
objects): those stay free to change, and nothing UI-only is computed on the engine's hot path. Build
one with `engine_view(engine)` after a step.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..block_manager import first_owners


@dataclass(frozen=True)
class SeqView:
    """One sequence (a request, or one of its parallel samples) and its place in the state rule."""

    seq_id: int
    request_id: int  # the request it belongs to (== seq_id unless it is a forked sample)
    sample_index: int  # 0 for the request's own sequence, 1.. for forked samples
    prompt_len: int
    generated_token_ids: tuple[int, ...]
    # logical block -> physical block; () while waiting or once finished
    block_table: tuple[int, ...]
    cached_token_count: int  # tokens whose K/V are written
    status: str  # "waiting", "running" or "finished"
    finish_reason: str | None
    preemptions: int


@dataclass(frozen=True)
class EngineView:
    """The paged pool and every sequence after `step` engine steps."""

    step: int
    num_blocks: int
    block_size: int
    num_free_blocks: int
    tables: dict[int, tuple[int, ...]]  # seq_id -> block table, for every sequence holding blocks
    ref_counts: tuple[int, ...]  # physical block -> how many tables hold it
    # blocks indexed by the prefix cache (their full-prefix hash is known)
    cached_blocks: tuple[int, ...]
    # seq_id -> per logical block, a prefix-cache hit at its allocation
    prefix_hits: dict[int, tuple[bool, ...]]
    seqs: dict[int, SeqView]  # every sequence ever added, forked samples included, by id
    waiting: tuple[int, ...]
    running: tuple[int, ...]

    @property
    def finished(self) -> tuple[int, ...]:
        return tuple(sid for sid, s in self.seqs.items() if s.status == "finished")

    @property
    def groups(self) -> dict[int, tuple[int, ...]]:
        """request id -> its sequences' ids (the request's own first, then its forked samples)."""
        out: dict[int, list[int]] = {}
        for sid, s in sorted(self.seqs.items(),
                             key=lambda kv: (kv[1].request_id, kv[1].sample_index)):
            out.setdefault(s.request_id, []).append(sid)
        return {rid: tuple(ids) for rid, ids in out.items()}

    @property
    def ownership(self) -> tuple[int | None, ...]:
        """physical block -> the first sequence (allocation order) holding it; None: free."""
        return tuple(first_owners(self.tables, self.num_blocks))

    @property
    def held_blocks(self) -> int:
        """Distinct physical blocks in use."""
        return sum(1 for c in self.ref_counts if c > 0)

    @property
    def table_blocks(self) -> int:
        """Block references in all tables: what the pool would hold without sharing."""
        return sum(self.ref_counts)

    @property
    def shared_saved(self) -> int:
        return self.table_blocks - self.held_blocks

    @property
    def cached_counts(self) -> dict[int, int]:
        """seq_id -> cached_token_count of each sequence holding blocks (the pool figure's fill)."""
        return {sid: self.seqs[sid].cached_token_count for sid in self.tables}


def engine_view(engine) -> EngineView:
    """A view of `engine` (an LLMEngine) now. Reads the engine's parts; the caller never has to."""
    bm, sched = engine.block_manager, engine.scheduler
    seqs = {}
    for sid, s in engine.sequences.items():
        seqs[sid] = SeqView(sid, s.request_id, s.sample_index, s.prompt_len,
                            tuple(s.generated_token_ids), tuple(s.block_table),
                            s.cached_token_count,
                            s.status.value, s.finish_reason, s.preemptions)
    return EngineView(step=engine.step_count, num_blocks=bm.num_blocks, block_size=bm.block_size,
                      num_free_blocks=bm.num_free_blocks,
                      tables={sid: tuple(t) for sid, t in bm.tables.items()},
                      ref_counts=tuple(bm.ref_counts),
                      cached_blocks=tuple(bm.block_hash),
                      prefix_hits={k: tuple(v) for k, v in bm.last_hits.items()},
                      seqs=seqs, waiting=tuple(s.seq_id for s in sched.waiting),
                      running=tuple(s.seq_id for s in sched.running))
